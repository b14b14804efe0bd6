import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  type BigIntStats,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { ContractError, absolutePath } from '@leasehold/contracts';
import { entryTypeBreach, ownershipBreaches, UnsafeEntryError } from './entry-safety.js';
import { isErrno } from './errno.js';
import { conflict, refused, removedMeanwhile, unlessRemoved } from './file-errors.js';
import type { MutationOperation, StepReporter } from './mutation-steps.js';
import { activeOperation, type OperationScope } from './operation-scope.js';

// libuv opens every descriptor close-on-exec, so child processes never inherit one.
const DIRECTORY_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** The nearest level of `path` (itself or above) that exists: under ENOTDIR, the file that stands where a folder should. */
function firstLevelThere(path: string): string {
  for (let level = path; ; level = dirname(level)) {
    try {
      lstatSync(level);
      return level;
    } catch {
      if (level === dirname(level)) return level;
    }
  }
}

/** A folder above the root that cannot be made in: its parent is a dangling link (or was removed meanwhile). */
function unreachableParent(path: string): ContractError {
  return refused(
    path,
    `cannot be made: ${dirname(path)} is a dangling symbolic link; point it at a folder or remove it, then try again`,
  );
}

/** Refuses a level that is a link, not a folder, or not private. */
export function checkDirectory(path: string, stats: BigIntStats): void {
  const breach = entryTypeBreach(path, stats, 'folder') ?? ownershipBreaches(path, stats)[0];
  if (breach !== undefined) throw new UnsafeEntryError(breach);
}

/**
 * Whether `path` is a folder a person made with `mkdir` for this user and left as it was: this
 * user's, empty, its one breach group or other permission bits (a umask's 0755). Nothing in it
 * is trusted or exposed yet, so it may be tightened; a link, another user's folder, or one that
 * holds anything stays refused.
 */
function madeByMkdir(path: string, stats: BigIntStats): boolean {
  if (entryTypeBreach(path, stats, 'folder') !== undefined) return false;
  const breaches = ownershipBreaches(path, stats);
  return (
    breaches.length === 1 &&
    breaches[0]!.rule === 'open-mode' &&
    unlessRemoved(path, () => readdirSync(path)).length === 0
  );
}

/** Fsyncs a folder, so that the names made, renamed or removed in it survive a power loss. */
export function fsyncDirectory(path: string): void {
  const descriptor = unlessRemoved(path, () => openSync(path, DIRECTORY_FLAGS));
  try {
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
}

// The strings `absolutePath` accepted: every call checks its paths, and the same few come back in
// every operation. Only the string's form is remembered, never anything about the file system.
const absolutePaths = new Set<string>();
const ABSOLUTE_PATHS = 256;

/** Whether `path` is absolute and normalised (`absolutePath`), without parsing a string it accepted before. */
function isAbsolutePath(path: string): boolean {
  if (absolutePaths.has(path)) return true;
  if (!absolutePath.safeParse(path).success) return false;
  if (absolutePaths.size >= ABSOLUTE_PATHS) absolutePaths.clear();
  absolutePaths.add(path);
  return true;
}

/** lstat, with absence as undefined; a file where a folder should be is `refused`. */
export function lookup(path: string): BigIntStats | undefined {
  try {
    // Absence answers undefined without an exception: building one costs more than the lstat.
    return lstatSync(path, { bigint: true, throwIfNoEntry: false });
  } catch (error) {
    if (isErrno(error, 'ENOTDIR'))
      throw refused(path, `${firstLevelThere(dirname(path))} is not a folder; make it one or choose another path`);
    throw error;
  }
}

/**
 * The folders of one root, reached from the root down without following
 * links: every level checked to be a private folder of this user, and a
 * missing one made 0700 with its parent fsynced, when an operation asks.
 */
export class FolderWalk {
  readonly root: string;
  readonly #step: StepReporter;

  constructor(root: string, step: StepReporter) {
    this.root = root;
    this.#step = step;
  }

  /** `path` itself, once proven absolute, normalised and strictly inside the root. */
  inside(path: string): string {
    // No `path`: the input is not one.
    if (!isAbsolutePath(path)) throw new ContractError('refused', 'path: not an absolute, normalised path');
    if (path !== this.root && !path.startsWith(this.root === '/' ? '/' : `${this.root}/`)) {
      throw refused(path, 'outside the root');
    }
    return path;
  }

  /** The folder of a file path strictly below the root. */
  parentOf(path: string): string {
    if (this.inside(path) === this.root) throw refused(path, 'is the root, not a file');
    return dirname(path);
  }

  /**
   * The folder of a file path below the root, which must exist and be safe.
   * Missing, it is `refused` for a new file (the caller makes folders) and
   * `conflict` for one the caller read (it is gone, folder and all).
   */
  folderOf(path: string, target: 'new' | 'read'): string {
    const folder = this.parentOf(path);
    if (this.walk(folder, undefined)) return folder;
    if (target === 'read') throw conflict(path, `absent: its folder ${folder} no longer exists; read again`);
    throw refused(path, `its folder ${folder} does not exist; make it first with directory('${folder}', true)`);
  }

  /**
   * Checks every folder from the root down to `folder`; a missing level is
   * `false`, or is made (0700, parent fsynced) when `creating` names the operation.
   * In an operation, a level proved earlier in it is not walked again: `folder`
   * itself, proved, is checked to be still that folder (one lstat, once per call).
   */
  walk(folder: string, creating: MutationOperation | undefined): boolean {
    this.inside(folder);
    const operation = activeOperation();
    if (operation !== undefined && this.#stillProved(operation, folder)) return true;
    const below = folder === this.root ? [] : folder.slice(this.root.length + 1).split('/');
    let current = this.root;
    for (let level = 0; level <= below.length; level += 1) {
      if (level > 0) current = join(current, below[level - 1]!);
      if (operation?.proofOf(this.root, current) !== undefined) continue; // proved in this operation: trusted until it ends
      if (operation !== undefined) operation.foldersWalked += 1;
      const proved = this.#checkLevel(current, level === 0, creating);
      if (proved === undefined) return false;
      operation?.prove(this.root, current, proved);
    }
    return true;
  }

  /**
   * Whether `folder`, proved earlier in this operation, is still the folder
   * proved: checked once per call (a walk or one lstat). A folder that is gone
   * is walked again (absence is an answer); one that is a link or unsafe now
   * is `refused`; another private folder in its place is `conflict`.
   */
  #stillProved(operation: OperationScope, folder: string): boolean {
    const proof = operation.proofOf(this.root, folder);
    if (proof === undefined) return false;
    if (proof.checkedIn === operation.call) return true;
    const stats = lookup(folder);
    if (stats !== undefined && stats.dev === proof.dev && stats.ino === proof.ino) {
      checkDirectory(folder, stats);
      proof.checkedIn = operation.call;
      return true;
    }
    operation.forget(folder);
    if (stats === undefined) return false;
    checkDirectory(folder, stats);
    throw conflict(folder, 'replaced by another folder during this operation; try again');
  }

  /** One level of a walk, checked (made, when `creating`); its stats, or undefined when it is missing. */
  #checkLevel(current: string, root: boolean, creating: MutationOperation | undefined): BigIntStats | undefined {
    const stats = lookup(current);
    if (stats !== undefined) {
      if (root && madeByMkdir(current, stats)) {
        // An empty root is not there yet for a reader; the first writer makes it private.
        if (creating === undefined) return undefined;
        return this.#tighten(creating, current, stats);
      }
      checkDirectory(current, stats);
      return stats;
    }
    if (creating === undefined) return undefined;
    if (root) this.#makeAncestors(creating);
    return this.#makeFolder(creating, current, true);
  }

  /**
   * Makes the missing folders above a missing root, top down, like
   * `mkdir -p -m 700`: on a fresh machine even `~/.local/state` may not exist.
   * They lie outside the root, so, like the ones that exist, they are not checked.
   */
  #makeAncestors(operation: MutationOperation): void {
    const missing: string[] = [];
    for (let folder = dirname(this.root); lookup(folder) === undefined; folder = dirname(folder))
      missing.unshift(folder);
    for (const folder of missing) this.#makeFolder(operation, folder, false);
  }

  /**
   * Makes the root, found as `madeByMkdir` says, 0700: on a descriptor opened without following a
   * link and proved to be the folder just checked, then fsynced, and checked like any level.
   */
  #tighten(operation: MutationOperation, path: string, stats: BigIntStats): BigIntStats {
    const descriptor = unlessRemoved(path, () => openSync(path, DIRECTORY_FLAGS));
    try {
      const opened = fstatSync(descriptor, { bigint: true });
      if (opened.dev !== stats.dev || opened.ino !== stats.ino)
        throw conflict(path, 'replaced while it was checked; try again');
      this.#step(operation, 'chmod', path);
      fchmodSync(descriptor, 0o700);
      this.#step(operation, 'fsync-directory', path);
      fsyncSync(descriptor);
    } finally {
      closeSync(descriptor);
    }
    const tightened = unlessRemoved(path, () => lstatSync(path, { bigint: true }));
    checkDirectory(path, tightened);
    return tightened;
  }

  /**
   * Makes one folder 0700 and fsyncs its parent; `inside` the root, it is then checked like any
   * level, and its stats answered (undefined above the root, where nothing is checked).
   */
  #makeFolder(operation: MutationOperation, path: string, inside: boolean): BigIntStats | undefined {
    this.#step(operation, 'mkdir', path);
    try {
      mkdirSync(path, { mode: 0o700 });
    } catch (error) {
      // Below the root the parent was just checked, so ENOENT is a race; above it, a dangling link gives it too.
      if (isErrno(error, 'ENOENT'))
        throw inside && path !== this.root ? removedMeanwhile(path, error) : unreachableParent(path);
      if (!isErrno(error, 'EEXIST')) throw error; // EEXIST: another writer made it first (checked below, inside the root)
    }
    let made: BigIntStats | undefined;
    if (inside) {
      made = unlessRemoved(path, () => lstatSync(path, { bigint: true }));
      checkDirectory(path, made);
    }
    this.#step(operation, 'fsync-directory', dirname(path));
    fsyncDirectory(dirname(path));
    return made;
  }
}
