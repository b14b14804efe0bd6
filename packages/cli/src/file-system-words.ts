import { magicInHex } from '@leasehold/contracts';
import { fileSystemOf, stateHomeFileSystem, type FileSystem } from '@leasehold/state-home';

/**
 * The state home's file system in words, the same in every command: `ext2/ext3/ext4 (local: proven)`,
 * `nfs (not proven: …)`, with the magic number of one the table does not name; `allowed` once this
 * state home records an allowance for it.
 */
function fileSystemWords({ name, magic, proven }: FileSystem, allowed = false): string {
  if (proven) return `${name} (local: proven)`;
  const named = name === 'unknown' ? `unknown, magic ${magicInHex(magic)}` : name;
  if (allowed) return `${named} (not proven; allowed here, its check passed)`;
  return `${named} (not proven: Leasehold's guarantees are not known to hold there)`;
}

/** A state home's file system as `status`, `doctor` and `init` report it: in JSON and in words. */
export interface FileSystemReport {
  readonly record: FileSystem & { readonly allowed: boolean };
  readonly words: string;
}

/**
 * The file system `stateHome` is on (where it will be made, when it is not there yet) and whether
 * it records an allowance for it. A state home that cannot be reached is reported as allowing
 * nothing: what keeps it out of reach is a finding, or the command's own error.
 */
export function fileSystemReport(stateHome: string): FileSystemReport {
  let judged: { readonly fileSystem: FileSystem; readonly allowed: boolean };
  try {
    judged = stateHomeFileSystem(stateHome);
  } catch {
    judged = { fileSystem: fileSystemOf(stateHome), allowed: false };
  }
  const { fileSystem, allowed } = judged;
  return { record: { ...fileSystem, allowed }, words: fileSystemWords(fileSystem, allowed) };
}
