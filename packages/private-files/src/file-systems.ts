import { statfsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ContractError } from '@leasehold/contracts';
import { errnoOf, isErrno } from './errno.js';

/** The file system a path is on, as the kernel names it by its magic number. */
export interface FileSystem {
  /** Its name (`ext2/ext3/ext4`, `tmpfs`, `nfs`, `fuse`, …), or `unknown` for a magic not in the table. */
  readonly name: string;
  /** The magic number `statfs(2)` answers in `f_type`, as an unsigned 32-bit value (0xEF53 for ext4). */
  readonly magic: number;
  /**
   * Whether the guarantees hold there: rename, link and exclusive create seen by every process of this
   * host at once, and fsync honoured. True only for the local file systems of the table.
   */
  readonly proven: boolean;
}

/**
 * The one table of file systems, by magic number. The numbers are the Linux kernel's
 * (include/uapi/linux/magic.h and the statfs(2) man page), except GFS2_MAGIC
 * (include/uapi/linux/gfs2_ondisk.h), ZFS_SUPER_MAGIC (OpenZFS, include/sys/fs/zfs.h) and
 * LL_SUPER_MAGIC (Lustre, lustre_user.h). The proven ones are local: one kernel sees every
 * process's rename, link and exclusive create at once. The others are named so that a refusal can
 * say what it refuses: a network or cluster file system (another host's cache may not see a
 * rename yet) or FUSE (whatever the process behind it does).
 */
const FILE_SYSTEMS: readonly (readonly [name: string, magic: number, proven: boolean])[] = [
  // ext2, ext3 and ext4 share one magic: the kernel does not tell them apart here.
  ['ext2/ext3/ext4', 0xef53, true],
  ['xfs', 0x58465342, true],
  ['btrfs', 0x9123683e, true],
  ['tmpfs', 0x01021994, true],
  ['overlay', 0x794c7630, true],
  ['f2fs', 0xf2f52010, true],
  ['zfs', 0x2fc12fc1, true],
  ['bcachefs', 0xca451a4e, true],
  ['nfs', 0x6969, false],
  ['smb', 0x517b, false],
  ['cifs', 0xff534d42, false],
  ['smb2', 0xfe534d42, false],
  ['9p', 0x01021997, false],
  ['afs', 0x5346414f, false],
  ['kafs', 0x6b414653, false],
  ['ceph', 0x00c36400, false],
  ['gfs2', 0x01161970, false],
  ['ocfs2', 0x7461636f, false],
  ['lustre', 0x0bd00bd0, false],
  ['fuse', 0x65735546, false],
];

/** The errors of a path (or a level of it) that is not there yet, or that this process may not search. */
const NOT_REACHED = ['ENOENT', 'ENOTDIR', 'EACCES'];

/**
 * The file system `path` is on, read with `statfs(2)`. A path that does not exist yet is judged by
 * its nearest existing ancestor folder, where it would be made (a state home not made yet is on the
 * file system it will be made on); so is a path below a folder this process may not search. A
 * relative path is resolved against the working folder. Changes nothing.
 *
 * Throws `refused` (naming the path, with a remedy and the system error as its `cause`) for a path
 * that cannot be followed (ELOOP, ENAMETOOLONG); another system error (EIO) is the disk's and is
 * rethrown as it is.
 */
export function fileSystemOf(path: string): FileSystem {
  const absolute = resolve(path);
  for (let level = absolute; ; level = dirname(level)) {
    try {
      return named(statfsSync(level).type);
    } catch (error) {
      if (isErrno(error, 'ELOOP', 'ENAMETOOLONG')) throw unfollowable(absolute, error);
      if (!isErrno(error, ...NOT_REACHED) || level === dirname(level)) throw error;
    }
  }
}

/** `refused` for a path whose levels cannot be followed to a file system. */
function unfollowable(path: string, cause: unknown): ContractError {
  return new ContractError('refused', `${path}: its file system cannot be read (${errnoOf(cause)})`, {
    path,
    remedy: 'name a path without a loop of symbolic links, short enough to follow',
    cause,
  });
}

/** The table's entry for `type`, or `unknown`; `type >>> 0` because some builds answer a large magic as negative. */
function named(type: number): FileSystem {
  const magic = type >>> 0;
  const known = FILE_SYSTEMS.find((entry) => entry[1] === magic);
  return known === undefined ? { name: 'unknown', magic, proven: false } : { name: known[0], magic, proven: known[2] };
}
