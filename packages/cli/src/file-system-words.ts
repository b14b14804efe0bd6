import type { FileSystem } from '@leasehold/state-home';

/**
 * The state home's file system in words, the same in every command: `ext2/ext3/ext4 (local: proven)`,
 * `nfs (not proven: …)`, with the magic number of one the table does not name.
 */
export function fileSystemWords({ name, magic, proven }: FileSystem): string {
  if (proven) return `${name} (local: proven)`;
  const named = name === 'unknown' ? `unknown, magic 0x${magic.toString(16)}` : name;
  return `${named} (not proven: Leasehold's guarantees are not known to hold there)`;
}
