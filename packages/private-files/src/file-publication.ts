import { fstatSync, linkSync, renameSync, unlinkSync } from 'node:fs';
import { sha256 } from '@leasehold/contracts';
import { isErrno } from './errno.js';
import { conflict, refused, removedMeanwhile, unlessGone, unlessRemoved } from './file-errors.js';
import { stampOf, type FileReads, type FileSnapshot } from './file-reads.js';
import { fsyncDirectory, lookup, type FolderWalk } from './folder-walk.js';
import type { MutationOperation, StepReporter } from './mutation-steps.js';
import type { StagedTemp, StagingFolder } from './staging-folder.js';

/**
 * Whether a `create`, `replace` or `remove` fsyncs the folder it changed
 * (default true). With `syncFolder: false` the change is durable only once a
 * later fsync of that folder runs, and a power loss before it may lose the
 * new name or the replacement, or bring the removed name back. Only for a
 * file whose loss or return after a crash is harmless (a lock whose holder
 * the crash ended, which the next writer takes over), or for all but the last
 * of several changes to one folder whose last one fsyncs it, when any subset
 * of them surviving a power loss is safe. The file's own data is fsynced
 * either way.
 */
export interface PublishOptions {
  readonly syncFolder?: boolean;
}

/**
 * The publication of single files under one root, each a short sequence
 * whose order is its crash safety: a new file is a staged, fsynced temp
 * linked into place (exclusive), a replacement one renamed over the file it
 * compared, a removal an unlink after the compare; then the folder fsync.
 */
export class FilePublication {
  readonly #folders: FolderWalk;
  readonly #staging: StagingFolder;
  readonly #reads: FileReads;
  readonly #step: StepReporter;

  constructor(folders: FolderWalk, staging: StagingFolder, reads: FileReads, step: StepReporter) {
    this.#folders = folders;
    this.#staging = staging;
    this.#reads = reads;
    this.#step = step;
  }

  /** Publishes a new file exclusively; see `PrivateFiles.create`. */
  create(path: string, bytes: Uint8Array, maxBytes: number, options: PublishOptions): FileSnapshot {
    const folder = this.#prepareWrite(path, bytes, maxBytes, 'new');
    if (lookup(path) !== undefined) throw conflict(path, 'already exists');
    const temp = this.#staging.stage('create', bytes);
    try {
      this.#step('create', 'link', path, { source: temp.staged });
      try {
        linkSync(temp.staged, path);
      } catch (error) {
        if (isErrno(error, 'EEXIST')) throw conflict(path, 'already exists');
        if (isErrno(error, 'ENOENT')) throw removedMeanwhile(path, error);
        throw error;
      }
      this.#step('create', 'unlink', temp.staged);
      unlessGone(() => unlinkSync(temp.staged));
      return this.#published('create', folder, temp, bytes, options);
    } finally {
      this.#staging.discard('create', temp);
    }
  }

  /** Replaces the file when it is still exactly `expected`; see `PrivateFiles.replace`. */
  replace(
    path: string,
    expected: FileSnapshot,
    bytes: Uint8Array,
    maxBytes: number,
    options: PublishOptions,
  ): FileSnapshot {
    const folder = this.#prepareWrite(path, bytes, maxBytes, 'read');
    this.#reads.expect(path, expected, maxBytes);
    const temp = this.#staging.stage('replace', bytes);
    try {
      this.#reads.expect(path, expected, maxBytes);
      this.#step('replace', 'rename', path, { source: temp.staged });
      unlessRemoved(path, () => renameSync(temp.staged, path));
      return this.#published('replace', folder, temp, bytes, options);
    } finally {
      this.#staging.discard('replace', temp);
    }
  }

  /** Removes the file when it is still exactly `expected`; see `PrivateFiles.remove`. */
  remove(path: string, expected: FileSnapshot, maxBytes: number, options: PublishOptions): void {
    const folder = this.#folders.folderOf(path, 'read');
    this.#reads.expect(path, expected, maxBytes);
    this.#step('remove', 'unlink', path);
    unlessRemoved(path, () => unlinkSync(path));
    this.#syncFolder('remove', folder, options);
  }

  #prepareWrite(path: string, bytes: Uint8Array, maxBytes: number, target: 'new' | 'read'): string {
    // Bounds before anything is written, so an oversized write changes nothing.
    if (bytes.byteLength > maxBytes) throw refused(path, `${bytes.byteLength} bytes is over the bound of ${maxBytes}`);
    return this.#folders.folderOf(path, target);
  }

  /** Once the temp is linked or renamed to its name in `folder`: the folder fsync (unless `syncFolder: false`), and the new file's snapshot. */
  #published(
    operation: MutationOperation,
    folder: string,
    temp: StagedTemp,
    bytes: Uint8Array,
    options: PublishOptions,
  ): FileSnapshot {
    temp.pending = false;
    const published = fstatSync(temp.descriptor, { bigint: true });
    this.#syncFolder(operation, folder, options);
    return { bytes, identity: sha256(bytes), stamp: stampOf(published) };
  }

  #syncFolder(operation: MutationOperation, folder: string, options: PublishOptions): void {
    if (options.syncFolder === false) return;
    this.#step(operation, 'fsync-directory', folder);
    fsyncDirectory(folder);
  }
}
