import { closeSync, constants, fstatSync, openSync, readdirSync, readSync, type BigIntStats } from 'node:fs';
import { ContractError, STAGING_FOLDER, sha256 } from '@leasehold/contracts';
import { entryTypeBreach, ownershipBreaches, UnsafeEntryError } from './entry-safety.js';
import { isErrno } from './errno.js';
import { conflict, unlessRemoved } from './file-errors.js';
import { lookup, type FolderWalk } from './folder-walk.js';
import type { StagingFolder } from './staging-folder.js';

/** One read of a file: its bytes, their SHA-256, and the incarnation of the file that held them. */
export interface FileSnapshot {
  readonly bytes: Uint8Array;
  /** SHA-256 of `bytes`, lowercase hex. */
  readonly identity: string;
  /** Device, inode, size, mtime and ctime (ns): names this incarnation of the file. */
  readonly stamp: string;
}

// libuv opens every descriptor close-on-exec, so child processes never inherit one.
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** The stamp of a file's incarnation: device, inode, size, mtime and ctime (ns). */
export function stampOf(stats: BigIntStats): string {
  return `${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}`;
}

/** True when two snapshots are the same incarnation of the same bytes. */
export function sameSnapshot(a: FileSnapshot | undefined, b: FileSnapshot | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.identity === b.identity && a.stamp === b.stamp;
}

/**
 * The file's bytes, read until the size its descriptor showed (or the end, when it shrank): a
 * file that grew or changed meanwhile is caught by the stamp and size compared after the read,
 * so no read past that size is needed to see the end.
 */
export function readAll(descriptor: number, size: number, maxBytes: number, path: string): Uint8Array {
  const buffer = Buffer.allocUnsafe(Math.min(size, maxBytes) + 1);
  let length = 0;
  for (;;) {
    if (length === size) return new Uint8Array(buffer.subarray(0, length));
    const count = readSync(descriptor, buffer, length, buffer.byteLength - length, null);
    if (count === 0) return new Uint8Array(buffer.subarray(0, length));
    length += count;
    if (length > maxBytes) throw new UnsafeEntryError({ rule: 'too-large', path, maxBytes });
    if (length === buffer.byteLength) throw conflict(path, 'grew while it was read');
  }
}

/**
 * Opens the file at `path` for reading as `lstat` showed it, without following a link and without
 * blocking (a FIFO or device is refused before it is opened); undefined when it is absent. The
 * caller closes the descriptor, and compares the inode it opened with `seen`.
 * @throws ContractError `refused` (not a regular file, a link), `conflict` (removed while opened).
 */
export function openFile(path: string): { readonly seen: BigIntStats; readonly descriptor: number } | undefined {
  const seen = lookup(path);
  if (seen === undefined) return undefined;
  // Checked before opening: a FIFO or device is never opened at all.
  const unsafeType = entryTypeBreach(path, seen, 'file');
  if (unsafeType !== undefined) throw new UnsafeEntryError(unsafeType);
  try {
    return { seen, descriptor: openSync(path, READ_FLAGS) };
  } catch (error) {
    if (isErrno(error, 'ENOENT')) throw conflict(path, 'removed while it was opened');
    if (isErrno(error, 'ELOOP')) throw new UnsafeEntryError({ rule: 'symbolic-link', path, expected: 'file' });
    throw error;
  }
}

/**
 * The reads of one root: a file opened without following links and read
 * whole into a snapshot only when it is the same incarnation from lstat to
 * the last byte, a snapshot compared, a folder listed.
 */
export class FileReads {
  readonly #folders: FolderWalk;
  readonly #staging: StagingFolder;

  constructor(folders: FolderWalk, staging: StagingFolder) {
    this.#folders = folders;
    this.#staging = staging;
  }

  /** The file's snapshot, or undefined when it (or its folder) does not exist; see `PrivateFiles.read`. */
  read(path: string, maxBytes: number): FileSnapshot | undefined {
    if (!this.#folders.walk(this.#folders.parentOf(path), undefined)) return undefined;
    return this.#readFile(path, maxBytes);
  }

  /** Proves the file is exactly `expected`, or absent; see `PrivateFiles.assert`. */
  assert(path: string, expected: FileSnapshot | undefined, maxBytes: number): void {
    const current = this.read(path, maxBytes);
    if (!sameSnapshot(current, expected)) {
      throw conflict(path, expected === undefined ? 'exists' : 'changed since it was read');
    }
  }

  /** Whether the file is still `expected`'s incarnation, by one lstat; see `PrivateFiles.unchanged`. */
  unchanged(path: string, expected: FileSnapshot | undefined): boolean {
    this.#folders.inside(path);
    let stats: BigIntStats | undefined;
    try {
      stats = lookup(path);
    } catch (error) {
      if (ContractError.is(error)) return false; // a file where a folder was: not what was read
      throw error;
    }
    return stats === undefined ? expected === undefined : expected !== undefined && stampOf(stats) === expected.stamp;
  }

  /** The allowed names in a safe folder, sorted; see `PrivateFiles.entries`. */
  entries(folder: string, allowed: readonly (string | RegExp)[]): string[] {
    if (!this.#folders.walk(folder, undefined)) return [];
    const listed = unlessRemoved(folder, () => readdirSync(folder));
    const names = listed.filter((name) => !(folder === this.#folders.root && name === STAGING_FOLDER));
    const admitted = (name: string) =>
      allowed.some((entry) => (typeof entry === 'string' ? entry === name : entry.test(name)));
    if (!names.every(admitted)) throw new UnsafeEntryError({ rule: 'unexpected-entry', path: folder });
    return names.sort();
  }

  /** Proves the file, whose folders were checked, is exactly `expected`; `conflict` otherwise. */
  expect(path: string, expected: FileSnapshot, maxBytes: number): void {
    if (!sameSnapshot(this.#readFile(path, maxBytes), expected)) throw conflict(path, 'changed since it was read');
  }

  /** Reads one file whose folders were checked; see `read`. */
  #readFile(path: string, maxBytes: number): FileSnapshot | undefined {
    const found = openFile(path);
    if (found === undefined) return undefined;
    const { seen, descriptor } = found;
    try {
      const opened = fstatSync(descriptor, { bigint: true });
      // The name may have been pointed at another inode between lstat and open.
      if (opened.ino !== seen.ino || opened.dev !== seen.dev) throw conflict(path, 'replaced while it was opened');
      this.#checkFile(path, descriptor, opened, maxBytes);
      const bytes = readAll(descriptor, Number(opened.size), maxBytes, path);
      const after = fstatSync(descriptor, { bigint: true });
      // A rename over the file or an unlink drops the link count of the inode we hold to 0.
      if (after.nlink === 0n || stampOf(after) !== stampOf(opened) || bytes.byteLength !== Number(after.size)) {
        throw conflict(path, 'changed while it was read');
      }
      return { bytes, identity: sha256(bytes), stamp: stampOf(after) };
    } finally {
      closeSync(descriptor);
    }
  }

  #checkFile(path: string, descriptor: number, stats: BigIntStats, maxBytes: number): void {
    const unsafeType = entryTypeBreach(path, stats, 'file');
    if (unsafeType !== undefined) throw new UnsafeEntryError(unsafeType);
    if (stats.nlink === 0n) throw conflict(path, 'removed while it was opened');
    const [unowned] = ownershipBreaches(path, stats);
    if (unowned !== undefined) throw new UnsafeEntryError(unowned);
    if (stats.nlink > 1n && !this.#publishing(stats)) {
      // A live writer may have unlinked its temp while the staging folder was scanned: a link
      // count or stamp that moved since the open means this reader lost a race (`conflict`).
      const now = fstatSync(descriptor, { bigint: true });
      if (now.nlink !== stats.nlink || stampOf(now) !== stampOf(stats)) {
        throw conflict(path, 'changed while it was read');
      }
      throw new UnsafeEntryError({ rule: 'second-link', path });
    }
    if (stats.nlink > 1n) throw conflict(path, 'a writer is publishing it');
    if (stats.size > BigInt(maxBytes)) throw new UnsafeEntryError({ rule: 'too-large', path, maxBytes });
  }

  /**
   * A second link is ours only between `link` and the temp's unlink in
   * `create`: the other name is then a staging file of a live writer, and the
   * reader raced it (`conflict`, retry). A dead writer's leftover stays
   * `refused` until `sweepStaging`; any other hard link is refused for good.
   */
  #publishing(stats: BigIntStats): boolean {
    return this.#staging.entries().some(({ path, writer }) => {
      const other = lookup(path);
      return writer === 'live' && other?.ino === stats.ino && other.dev === stats.dev;
    });
  }
}
