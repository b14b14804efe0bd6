import { createHash } from 'node:crypto';

/** SHA-256 hex of `bytes`, computed here with node:crypto, independently of the packages under test. */
export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** UTF-8 bytes of a text. */
export function bytesOf(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}
