import { createHash } from 'node:crypto';

/**
 * The counter document the verifier's workers race on: canonical JSON `{"n":N,"pad":"…"}`, where
 * the pad (2 KiB) is derived from N. Bytes are a counter only when they are exactly the encoding
 * of the N they hold, so a read that mixed two versions, or caught one half-written, is seen.
 */
export function counterBytes(n: number): Uint8Array {
  const pad = createHash('sha256').update(`pad:${n}`).digest('hex').repeat(32);
  return new TextEncoder().encode(JSON.stringify({ n, pad }));
}

/** The N of a whole counter document, or undefined for bytes that are not exactly one (a torn read). */
export function counterOf(bytes: Uint8Array): number | undefined {
  let n: unknown;
  try {
    n = (JSON.parse(new TextDecoder().decode(bytes)) as { n?: unknown }).n;
  } catch {
    return undefined;
  }
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) return undefined;
  return Buffer.from(counterBytes(n)).equals(bytes) ? n : undefined;
}
