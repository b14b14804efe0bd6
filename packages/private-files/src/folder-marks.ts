import {
  chmodSync,
  chownSync,
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  unlinkSync,
  writeSync,
  type BigIntStats,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { ContractError, absolutePath, folderMarkPlaces, sha256, shellQuote } from '@leasehold/contracts';
import { entryTypeBreach, UnsafeEntryError } from './entry-safety.js';
import { errnoOf, isErrno } from './errno.js';
import { conflict, refused, unlessGone } from './file-errors.js';
import { openFile, readAll, sameSnapshot, stampOf, type FileSnapshot } from './file-reads.js';
import { fsyncDirectory, lookup } from './folder-walk.js';
import type { PublishOptions } from './file-publication.js';
import { stepReporter, type PrivateFilesHooks, type StepReporter } from './mutation-steps.js';
import { currentProcess, ownerStatus } from './process-liveness.js';
import { stagingName, stagingWriter } from './staging-name.js';

// The folder's own mark (SPEC 5.1a) lives in the workspace, which is the user's and not private
// (0755 is normal): unlike every other file of Leasehold it is readable by everyone, so that
// another user (root under sudo) is told whose ownership it is. It is a cooperation fence, not a
// security boundary: read as untrusted input (no link followed, no FIFO opened, bounded), written
// by the same exclusive, durable publication as a private file, its temp beside it in the
// dot-folder (a link cannot cross file systems, and the state home may be on another one).

/** A mark as read: its snapshot, and the user that owns the file. */
export interface MarkSnapshot extends FileSnapshot {
  readonly uid: number;
}

const CREATE_FLAGS = constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW;
const GROUP_OR_OTHER_WRITE = 0o022;
/** The dot-folder's and the mark's permission bits: everyone reads them, only their owner writes. */
const FOLDER_MODE = 0o755;
const FILE_MODE = 0o644;
/** What the dot-folder's `.gitignore` says: everything in it is ignored, itself too. */
const IGNORE_BYTES = new TextEncoder().encode('# Made by Leasehold: this folder holds its owner mark.\n*\n');
/** A temp in the dot-folder: a dot, then a staging name naming its writer. */
const TEMP_NAME = /^\.(.+\.tmp)$/;

/** The dot-folder and workspace root of a mark path `<root>/.leasehold/owner.json`. */
function markFolders(path: string): { folder: string; root: string; ignore: string } {
  const root = dirname(dirname(path));
  const places = absolutePath.safeParse(path).success ? folderMarkPlaces(root) : undefined;
  if (places?.mark !== path) throw new ContractError('refused', `${path}: not a folder mark's path`);
  return { folder: places.folder, root, ignore: places.ignore };
}

/** The user `uid` in words: its name from the password file when it has one, and the uid. */
export function describeUser(uid: number): string {
  try {
    const line = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .find((entry) => entry.split(':')[2] === String(uid));
    const name = line?.split(':')[0];
    if (name !== undefined && /^[A-Za-z0-9._-]{1,32}$/.test(name)) return `${name} (uid ${uid})`;
  } catch {
    // No password file to read: the uid alone.
  }
  return `uid ${uid}`;
}

/** `refused` for a level of the mark that anyone but its owner may write: a mark anyone can forge is no fence. */
function openToWriters(path: string): ContractError {
  return new ContractError('refused', `${path}: group or others may write it`, {
    path,
    remedy: `take the group and other write bits away: \`chmod go-w ${shellQuote(path)}\``,
  });
}

/** `refused` for a workspace folder where the mark cannot be written: nothing else was written. */
function unwritable(folder: string, error: unknown): ContractError {
  const code = errnoOf(error) ?? 'unknown';
  const why = code === 'EROFS' ? 'the file system is read-only' : `it cannot be written here (${code})`;
  return new ContractError('refused', `${folder}: ${why}; the folder's owner mark lives there`, {
    path: folder,
    remedy: 'serve a folder this user can write to, or run as the user who owns it',
    cause: error,
  });
}

function checkLevel(path: string, stats: BigIntStats, expected: 'folder' | 'file'): void {
  const breach = entryTypeBreach(path, stats, expected);
  if (breach !== undefined) throw new UnsafeEntryError(breach);
  if ((Number(stats.mode) & GROUP_OR_OTHER_WRITE) !== 0) throw openToWriters(path);
}

/**
 * The marks of workspace folders: `<root>/.leasehold/owner.json`, each published exclusively and
 * durably, removed by compare-and-swap, read without following a link. Every call is one short,
 * synchronous sequence of system calls; each mutating one is told to `hooks.beforeMutation`.
 */
export class FolderMarks {
  readonly #step: StepReporter;

  constructor(options: { readonly hooks?: PrivateFilesHooks } = {}) {
    this.#step = stepReporter(options.hooks);
  }

  /**
   * The mark at `path`, or undefined when it or its dot-folder is absent.
   * @throws ContractError `refused` (a link, FIFO, folder or oversized file in its place, or a level
   * others may write), `conflict` (replaced or removed while read).
   */
  read(path: string, maxBytes: number): MarkSnapshot | undefined {
    const { folder, root } = markFolders(path);
    const rootStats = lookup(root);
    if (rootStats === undefined) return undefined;
    const rootBreach = entryTypeBreach(root, rootStats, 'folder');
    if (rootBreach !== undefined) throw new UnsafeEntryError(rootBreach);
    const folderStats = lookup(folder);
    if (folderStats === undefined) return undefined;
    checkLevel(folder, folderStats, 'folder');
    const found = openFile(path);
    if (found === undefined) return undefined;
    const { seen, descriptor } = found;
    try {
      return readMark(path, descriptor, seen, maxBytes);
    } finally {
      closeSync(descriptor);
    }
  }

  /**
   * Proves the mark is exactly `expected` (absent for undefined).
   * @throws ContractError `conflict` when it is not; as `read`.
   */
  assert(path: string, expected: FileSnapshot | undefined, maxBytes: number): void {
    if (!sameSnapshot(this.read(path, maxBytes), expected)) {
      throw conflict(path, expected === undefined ? 'exists' : 'changed since it was read');
    }
  }

  /** Whether the mark is still `expected`'s incarnation (absent for undefined), by one lstat. */
  unchanged(path: string, expected: FileSnapshot | undefined): boolean {
    markFolders(path);
    let stats: BigIntStats | undefined;
    try {
      stats = lookup(path);
    } catch {
      return false;
    }
    return stats === undefined ? expected === undefined : expected !== undefined && stampOf(stats) === expected.stamp;
  }

  /**
   * Publishes the mark exclusively: the dot-folder made when missing (0755, with its `.gitignore`
   * of `*`; by root, given to the workspace folder's owner), then a temp beside the mark, fsynced,
   * linked into place, unlinked, and the dot-folder fsynced.
   * @throws ContractError `conflict` (a mark is there already), `refused` (over `maxBytes`, an unsafe
   * level, a folder that cannot be written: nothing left behind but what was there).
   */
  create(path: string, bytes: Uint8Array, maxBytes: number): MarkSnapshot {
    const { folder, root, ignore } = markFolders(path);
    if (bytes.byteLength > maxBytes) throw refused(path, `${bytes.byteLength} bytes is over the bound of ${maxBytes}`);
    if (this.read(path, maxBytes) !== undefined) throw conflict(path, 'already exists');
    this.#folder(folder, root);
    this.#sweep(folder);
    if (lookup(ignore) === undefined) {
      try {
        // Its folder fsync is the mark's, next: it only hides the folder from version control.
        this.#publish(ignore, IGNORE_BYTES, folder, false);
      } catch (error) {
        // Another writer made it first: one `.gitignore` is all it takes.
        if (!ContractError.is(error, 'conflict')) throw error;
      }
    }
    return this.#publish(path, bytes, folder, true);
  }

  /**
   * Removes the mark when it is still exactly `expected`, then fsyncs the dot-folder (unless
   * `options.syncFolder` is false). The dot-folder stays, as a tool's cache folder does.
   * @throws ContractError `conflict` (the mark changed or is gone), as `read`.
   */
  remove(path: string, expected: FileSnapshot, maxBytes: number, options: PublishOptions = {}): void {
    const { folder } = markFolders(path);
    if (!sameSnapshot(this.read(path, maxBytes), expected)) throw conflict(path, 'changed since it was read');
    this.#step('remove', 'unlink', path);
    try {
      unlinkSync(path);
    } catch (error) {
      if (isErrno(error, 'ENOENT')) throw conflict(path, 'removed meanwhile');
      throw error;
    }
    if (options.syncFolder === false) return;
    this.#step('remove', 'fsync-directory', folder);
    fsyncDirectory(folder);
  }

  /**
   * The nearest folder above `root` that carries a mark, with the mark: each ancestor's mark
   * looked up (a few lstats), up to the file system's root.
   * @throws ContractError as `read`, for the first ancestor whose mark cannot be read.
   */
  markedAncestor(root: string, maxBytes: number): { root: string; mark: MarkSnapshot } | undefined {
    for (let level = dirname(root); ; level = dirname(level)) {
      const mark = this.read(folderMarkPlaces(level).mark, maxBytes);
      if (mark !== undefined) return { root: level, mark };
      if (level === dirname(level)) return undefined;
    }
  }

  /** Makes the dot-folder when it is missing, and fsyncs the workspace folder that names it. */
  #folder(folder: string, root: string): void {
    const existing = lookup(folder);
    if (existing !== undefined) return checkLevel(folder, existing, 'folder');
    this.#step('create', 'mkdir', folder, { mode: FOLDER_MODE });
    try {
      mkdirSync(folder, { mode: FOLDER_MODE });
    } catch (error) {
      if (isErrno(error, 'EEXIST')) return checkLevel(folder, lookup(folder)!, 'folder');
      throw unwritable(root, error);
    }
    // Readable by everyone whatever the umask, so that another user is told whose ownership it is.
    if ((Number(lookup(folder)?.mode) & 0o777) !== FOLDER_MODE) {
      this.#step('create', 'chmod', folder);
      chmodSync(folder, FOLDER_MODE);
    }
    const owner = lookup(root);
    // Root (under sudo) gives the folder to the workspace's owner, who can then own it in turn.
    if (process.geteuid?.() === 0 && owner !== undefined && owner.uid !== 0n) {
      chownSync(folder, Number(owner.uid), Number(owner.gid));
    }
    this.#step('create', 'fsync-directory', root);
    fsyncDirectory(root);
  }

  /** Removes the temps of writers proved gone that this user may remove; another's stay, hidden by the `.gitignore`. */
  #sweep(folder: string): void {
    const { host } = currentProcess();
    for (const name of readdirSync(folder)) {
      const staged = TEMP_NAME.exec(name)?.[1];
      const writer = staged === undefined ? undefined : stagingWriter(staged, host);
      if (writer === undefined || ownerStatus(writer.pid, host, writer.processStart) !== 'absent') continue;
      this.#step('sweep-staging', 'unlink', join(folder, name));
      try {
        unlinkSync(join(folder, name));
      } catch (error) {
        if (!isErrno(error, 'ENOENT', 'EACCES', 'EPERM')) throw error;
      }
    }
  }

  /** A temp beside `path`, fsynced, linked to `path` exclusively, unlinked; then the folder fsynced, with `syncFolder`. */
  #publish(path: string, bytes: Uint8Array, folder: string, syncFolder: boolean): MarkSnapshot {
    const temp = join(folder, `.${stagingName(currentProcess())}`);
    this.#step('create', 'write', temp, { bytes, mode: FILE_MODE });
    let descriptor: number;
    try {
      descriptor = openSync(temp, CREATE_FLAGS, FILE_MODE);
    } catch (error) {
      throw unwritable(folder, error);
    }
    let pending = true;
    try {
      // Readable by everyone whatever the umask; the temp is not published yet.
      fchmodSync(descriptor, FILE_MODE);
      for (let written = 0; written < bytes.byteLength;) {
        written += writeSync(descriptor, bytes, written, bytes.byteLength - written);
      }
      this.#step('create', 'fsync', temp);
      fsyncSync(descriptor);
      this.#step('create', 'link', path, { source: temp });
      try {
        linkSync(temp, path);
      } catch (error) {
        if (isErrno(error, 'EEXIST')) throw conflict(path, 'already exists');
        throw error;
      }
      this.#step('create', 'unlink', temp);
      unlessGone(() => unlinkSync(temp));
      pending = false;
      const published = fstatSync(descriptor, { bigint: true });
      if (syncFolder) {
        this.#step('create', 'fsync-directory', folder);
        fsyncDirectory(folder);
      }
      return { bytes, identity: sha256(bytes), stamp: stampOf(published), uid: Number(published.uid) };
    } finally {
      closeSync(descriptor);
      // Best effort: a temp left behind names this writer, and the next publication here sweeps it once it is gone.
      if (pending) unlessGone(() => unlinkSync(temp));
    }
  }
}

/** Reads an opened mark whole, as the same incarnation from lstat to the last byte. */
function readMark(path: string, descriptor: number, seen: BigIntStats, maxBytes: number): MarkSnapshot {
  // A second link is allowed: a writer that died between its link and its temp's unlink leaves
  // one, which the next publication sweeps; the mark is a cooperation fence, not a secret.
  const opened = fstatSync(descriptor, { bigint: true });
  if (opened.ino !== seen.ino || opened.dev !== seen.dev) throw conflict(path, 'replaced while it was opened');
  checkLevel(path, opened, 'file');
  if (opened.nlink === 0n) throw conflict(path, 'removed while it was opened');
  if (opened.size > BigInt(maxBytes)) throw new UnsafeEntryError({ rule: 'too-large', path, maxBytes });
  const bytes = readAll(descriptor, Number(opened.size), maxBytes, path);
  const after = fstatSync(descriptor, { bigint: true });
  if (bytes.byteLength !== Number(after.size) || after.nlink === 0n || stampOf(after) !== stampOf(opened)) {
    throw conflict(path, 'changed while it was read');
  }
  return { bytes, identity: sha256(bytes), stamp: stampOf(after), uid: Number(after.uid) };
}
