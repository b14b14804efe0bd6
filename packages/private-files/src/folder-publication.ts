import { mkdirSync, readdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { conflict, refused, unlessRemoved } from './file-errors.js';
import type { FileReads, FileSnapshot } from './file-reads.js';
import { fsyncDirectory, lookup, type FolderWalk } from './folder-walk.js';
import type { StepReporter } from './mutation-steps.js';
import { activeOperation } from './operation-scope.js';
import { currentProcess } from './process-liveness.js';
import type { StagingFolder } from './staging-folder.js';
import { stagingName } from './staging-name.js';

/**
 * The publication of whole folders under one root, each through the staging
 * folder so that a crash leaves all of it or none: a new folder is staged,
 * filled, fsynced and renamed into place; an old one is compared file by
 * file, renamed into the staging folder, and only then removed. The parent
 * is fsynced right after each rename.
 */
export class FolderPublication {
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

  /** Publishes a new folder holding `files`, whole or not at all; see `PrivateFiles.createFolder`. */
  create(path: string, files: Readonly<Record<string, Uint8Array>>, maxBytes: number): void {
    const parent = this.#folders.folderOf(path, 'new');
    for (const [name, bytes] of Object.entries(files)) {
      if (!/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/.test(name)) throw refused(path, 'a file name is not a plain name');
      if (bytes.byteLength > maxBytes)
        throw refused(join(path, name), `${bytes.byteLength} bytes is over the bound of ${maxBytes}`);
    }
    if (lookup(path) !== undefined) throw conflict(path, 'already exists');
    this.#folders.walk(this.#staging.path, 'create-folder');
    const staged = join(this.#staging.path, stagingName(currentProcess(), 'dir'));
    this.#step('create-folder', 'mkdir', staged);
    unlessRemoved(staged, () => mkdirSync(staged, { mode: 0o700 }));
    let pending = true;
    try {
      for (const [name, bytes] of Object.entries(files)) this.#staging.writeFile(join(staged, name), bytes);
      this.#step('create-folder', 'fsync-directory', staged);
      fsyncDirectory(staged);
      // rename() silently replaces an empty folder: check absence once more, right before it.
      if (lookup(path) !== undefined) throw conflict(path, 'already exists');
      this.#step('create-folder', 'rename', path, { source: staged });
      unlessRemoved(path, () => renameSync(staged, path));
      pending = false;
      this.#step('create-folder', 'fsync-directory', parent);
      fsyncDirectory(parent);
    } finally {
      if (pending) this.#staging.removeFolder('create-folder', staged, true);
    }
  }

  /** Unpublishes a folder that holds exactly `expected`, whole or not at all; see `PrivateFiles.removeFolder`. */
  remove(path: string, expected: Readonly<Record<string, FileSnapshot>>, maxBytes: number): void {
    const parent = this.#folders.folderOf(path, 'read');
    if (!this.#folders.walk(path, undefined)) throw conflict(path, 'does not exist');
    const names = unlessRemoved(path, () => readdirSync(path)).sort();
    const wanted = Object.keys(expected).sort();
    if (names.length !== wanted.length || names.some((name, index) => name !== wanted[index])) {
      throw conflict(path, 'does not hold exactly the expected files');
    }
    for (const name of names) this.#reads.expect(join(path, name), expected[name]!, maxBytes);
    this.#folders.walk(this.#staging.path, 'remove-folder');
    const staged = join(this.#staging.path, stagingName(currentProcess(), 'dir'));
    // Reported like every rename: `path` is where the folder goes, `source` the folder.
    this.#step('remove-folder', 'rename', staged, { source: path });
    unlessRemoved(path, () => renameSync(path, staged));
    // What this operation proved of it went with it: a folder made at `path` later is walked anew.
    activeOperation()?.forget(path);
    this.#step('remove-folder', 'fsync-directory', parent);
    fsyncDirectory(parent);
    // From here the folder is gone; what is left is a staged leftover of this live writer.
    this.#staging.removeFolder('remove-folder', staged, true);
  }
}
