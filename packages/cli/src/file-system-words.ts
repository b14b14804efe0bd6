import type { FileSystem } from '@leasehold/state-home';

/**
 * The state home's file system in words, the same in every command: `ext2/ext3/ext4 (local: proven)`,
 * `nfs (not proven: …)`, with the magic number of one the table does not name; `allowed` once this
 * state home records an allowance for it.
 */
export function fileSystemWords({ name, magic, proven }: FileSystem, allowed = false): string {
  if (proven) return `${name} (local: proven)`;
  const named = name === 'unknown' ? `unknown, magic 0x${magic.toString(16)}` : name;
  if (allowed) return `${named} (not proven; allowed here, its check passed)`;
  return `${named} (not proven: Leasehold's guarantees are not known to hold there)`;
}
