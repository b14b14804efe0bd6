import { closeSync, constants, fsyncSync, openSync, readdirSync, rmdirSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { STAGING_FOLDER } from '@leasehold/contracts';
import { isErrno } from './errno.js';
import { unlessGone, unlessRemoved } from './file-errors.js';
import { checkDirectory, fsyncDirectory, lookup, type FolderWalk } from './folder-walk.js';
import type { MutationOperation, StepReporter } from './mutation-steps.js';
import { currentProcess, ownerStatus, type OwnerStatus } from './process-liveness.js';
import { stagingName, stagingWriter } from './staging-name.js';

/** What `sweepStaging` did: the leftovers it removed and those it kept (live, ambiguous or unknown writers). */
export interface StagingSweep {
  readonly removed: readonly string[];
  readonly kept: readonly string[];
}

/** A name in the staging folder and the liveness of the writer it names. */
export interface StagingEntry {
  readonly name: string;
  readonly path: string;
  readonly writer: OwnerStatus | 'unknown';
}

// libuv opens every descriptor close-on-exec, so child processes never inherit one.
const TEMP_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** A temp in the staging folder; `pending` until it is linked or renamed into place. */
export interface StagedTemp {
  readonly staged: string;
  readonly descriptor: number;
  pending: boolean;
}

function writeAll(descriptor: number, bytes: Uint8Array): void {
  let offset = 0;
  while (offset < bytes.byteLength) offset += writeSync(descriptor, bytes, offset);
}

/**
 * The staging folder below one root, where every file and folder is written
 * whole and fsynced before it is linked or renamed into place. Each name
 * there carries its writer, so a dead writer's leftover is told from a live
 * one's and swept; nothing is ever swept because it is old.
 */
export class StagingFolder {
  readonly path: string;
  readonly #folders: FolderWalk;
  readonly #step: StepReporter;

  constructor(folders: FolderWalk, step: StepReporter) {
    this.path = join(folders.root, STAGING_FOLDER);
    this.#folders = folders;
    this.#step = step;
  }

  /** What is in the staging folder, with each writer's liveness; see `stagingEntries`. */
  entries(): StagingEntry[] {
    if (!this.#folders.walk(this.path, undefined)) return [];
    const host = currentProcess().host;
    return unlessRemoved(this.path, () => readdirSync(this.path))
      .sort()
      .map((name) => {
        const writer = stagingWriter(name, host);
        const status = writer === undefined ? 'unknown' : ownerStatus(writer.pid, host, writer.processStart);
        return { name, path: join(this.path, name), writer: status };
      });
  }

  /** Removes the leftovers of `absent` writers; see `sweepStaging`. */
  sweep(): StagingSweep {
    const removed: string[] = [];
    const kept: string[] = [];
    for (const { name, path, writer } of this.entries()) {
      if (writer !== 'absent') {
        kept.push(name);
        continue;
      }
      if (name.endsWith('.dir')) {
        if (this.removeFolder('sweep-staging', path, false)) removed.push(name);
        else kept.push(name);
        continue;
      }
      this.#step('sweep-staging', 'unlink', path);
      unlessGone(() => unlinkSync(path));
      removed.push(name);
    }
    if (removed.length > 0) {
      this.#step('sweep-staging', 'fsync-directory', this.path);
      fsyncDirectory(this.path);
    }
    return { removed, kept };
  }

  /** Writes `bytes` to a fresh temp in the staging folder and fsyncs it; the descriptor stays open. */
  stage(operation: MutationOperation, bytes: Uint8Array): StagedTemp {
    this.#folders.walk(this.path, operation);
    const staged = join(this.path, stagingName(currentProcess()));
    this.#step(operation, 'write', staged, { bytes });
    const descriptor = unlessRemoved(staged, () => openSync(staged, TEMP_FLAGS, 0o600));
    const temp: StagedTemp = { staged, descriptor, pending: true };
    try {
      writeAll(temp.descriptor, bytes);
      this.#step(operation, 'fsync', staged);
      fsyncSync(temp.descriptor);
    } catch (error) {
      this.discard(operation, temp);
      throw error;
    }
    return temp;
  }

  /** Closes a staged temp and unlinks it while it is still pending; a failure here leaves it for sweepStaging. */
  discard(operation: MutationOperation, temp: StagedTemp): void {
    closeSync(temp.descriptor);
    if (!temp.pending) return;
    try {
      this.#step(operation, 'unlink', temp.staged);
      unlinkSync(temp.staged);
    } catch {
      // Best effort: the temp names this live writer, and sweepStaging removes it once this process is gone.
    }
  }

  /** Writes one file of a staged folder (`path` inside it) and fsyncs it. */
  writeFile(path: string, bytes: Uint8Array): void {
    this.#step('create-folder', 'write', path, { bytes });
    const descriptor = unlessRemoved(path, () => openSync(path, TEMP_FLAGS, 0o600));
    try {
      writeAll(descriptor, bytes);
      this.#step('create-folder', 'fsync', path);
      fsyncSync(descriptor);
    } finally {
      closeSync(descriptor);
    }
  }

  /**
   * Removes a staged folder that holds only regular files (what createFolder
   * stages); anything else in it is not ours, and the folder is kept.
   * `bestEffort` swallows failures (cleanup after an error already thrown).
   */
  removeFolder(operation: MutationOperation, folder: string, bestEffort: boolean): boolean {
    try {
      const stats = lookup(folder);
      if (stats === undefined) return false;
      checkDirectory(folder, stats);
      let names: string[];
      try {
        names = readdirSync(folder);
      } catch (error) {
        if (isErrno(error, 'ENOENT')) return false; // another sweeper removed it first
        throw error;
      }
      // A name already gone was removed by another sweeper of the same dead writer's folder.
      if (names.some((name) => lookup(join(folder, name))?.isFile() === false)) return false;
      for (const name of names) {
        this.#step(operation, 'unlink', join(folder, name));
        unlessGone(() => unlinkSync(join(folder, name)));
      }
      this.#step(operation, 'rmdir', folder);
      unlessGone(() => rmdirSync(folder));
      return true;
    } catch (error) {
      if (bestEffort) return false;
      throw error;
    }
  }
}
