import { randomBytes } from 'node:crypto';
import { sha256 } from '@leasehold/contracts';
import type { ProcessIdentity } from './process-liveness.js';

// A temp file's name carries its writer, so that sweepStaging can tell a live
// writer's file from a dead one's without any other record:
//   <pid>.<16 hex of sha256(host)>.<base64url(processStart) or "-">.<16 random hex>.<tmp|dir>
// (`tmp` a staged file, `dir` a staged folder).
const NAME = /^([0-9]{1,10})\.([0-9a-f]{16})\.([A-Za-z0-9_-]{1,172}|-)\.([0-9a-f]{16})\.(tmp|dir)$/;

/** A staged file or a staged folder. */
export type StagingKind = 'tmp' | 'dir';

// Each host's tag, hashed once: every staged name and every sweep of the staging folder asks for it.
const hostTags = new Map<string, string>();

function hostTag(host: string): string {
  let tag = hostTags.get(host);
  if (tag === undefined) {
    tag = sha256(new TextEncoder().encode(host)).slice(0, 16);
    if (hostTags.size >= 16) hostTags.clear();
    hostTags.set(host, tag);
  }
  return tag;
}

/** A fresh, unpredictable staging name for `writer`. */
export function stagingName(writer: ProcessIdentity, kind: StagingKind = 'tmp'): string {
  const start = writer.processStart === undefined ? '-' : Buffer.from(writer.processStart).toString('base64url');
  return `${writer.pid}.${hostTag(writer.host)}.${start}.${randomBytes(8).toString('hex')}.${kind}`;
}

/** The writer a temp name names, when it names one written on `host`; else undefined. */
export function stagingWriter(
  name: string,
  host: string,
): { pid: number; processStart: string | undefined; kind: StagingKind } | undefined {
  const match = NAME.exec(name);
  if (match === null || match[2] !== hostTag(host)) return undefined;
  const pid = Number(match[1]);
  if (!Number.isSafeInteger(pid) || pid < 1) return undefined;
  const start = match[3] === '-' ? undefined : Buffer.from(match[3]!, 'base64url').toString();
  return { pid, processStart: start, kind: match[5] as StagingKind };
}
