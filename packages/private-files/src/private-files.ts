import { ContractError, DOCUMENT_BYTES, absolutePath } from '@leasehold/contracts';
import { FilePublication, type PublishOptions } from './file-publication.js';
import { FileReads, type FileSnapshot } from './file-reads.js';
import { FolderPublication } from './folder-publication.js';
import { FolderWalk } from './folder-walk.js';
import { inOperation } from './operation-scope.js';
import { assertSupportedPlatform } from './platform.js';
import { stepReporter, type PrivateFilesHooks } from './mutation-steps.js';
import { StagingFolder, type StagingEntry, type StagingSweep } from './staging-folder.js';

export interface PrivateFilesOptions {
  readonly hooks?: PrivateFilesHooks;
}

/**
 * Private files under one root: every file 0600 and every folder 0700, owned
 * by this user, reached without following links, published whole and durably,
 * changed and removed only by compare-and-swap against the snapshot a caller
 * read. All calls are synchronous: each is a short, bounded sequence of
 * system calls whose order is the crash-safety argument. Each call is one
 * operation, or a step of the `fileOperation` running: the folders from the
 * root down are proved once per operation (see `fileOperation`).
 */
export class PrivateFiles {
  readonly root: string;
  readonly staging: string;
  readonly #folders: FolderWalk;
  readonly #staging: StagingFolder;
  readonly #reads: FileReads;
  readonly #publication: FilePublication;
  readonly #folderPublication: FolderPublication;

  /** @throws ContractError `refused` on Windows, or when `root` is not an absolute, normalised path. */
  constructor(root: string, options: PrivateFilesOptions = {}) {
    // Here, because every layer's files go through one: a constant check, refused before anything else.
    assertSupportedPlatform();
    // No `path`: the input is not one.
    if (!absolutePath.safeParse(root).success)
      throw new ContractError('refused', 'root: not an absolute, normalised path');
    this.root = root;
    const step = stepReporter(options.hooks);
    this.#folders = new FolderWalk(root, step);
    this.#staging = new StagingFolder(this.#folders, step);
    this.staging = this.#staging.path;
    this.#reads = new FileReads(this.#folders, this.#staging);
    this.#publication = new FilePublication(this.#folders, this.#staging, this.#reads, step);
    this.#folderPublication = new FolderPublication(this.#folders, this.#staging, this.#reads, step);
  }

  /**
   * Whether `path` is a safe folder (it and every folder from the root down).
   * With `create`, makes the missing levels 0700, fsyncing each parent: the
   * root too, and the folders above a missing root (a fresh machine).
   * @throws ContractError `refused` for an unsafe level or a path outside the root,
   * `conflict` for a level another process removed meanwhile.
   */
  directory(path: string, create = false): boolean {
    return inOperation(() => this.#folders.walk(path, create ? 'directory' : undefined));
  }

  /**
   * The file's snapshot, or undefined when it (or its folder) does not exist.
   * @throws ContractError `refused` (unsafe or oversized file), `conflict` (replaced or removed while read).
   */
  read(path: string, maxBytes = DOCUMENT_BYTES): FileSnapshot | undefined {
    return inOperation(() => this.#reads.read(path, maxBytes));
  }

  /**
   * Publishes a new file exclusively: staged temp, fsync, link, temp unlink, folder fsync
   * (unless `options.syncFolder` is false).
   * @throws ContractError `conflict` (something is already at `path`), `refused` (unsafe path, missing folder, over `maxBytes`).
   */
  create(path: string, bytes: Uint8Array, maxBytes = DOCUMENT_BYTES, options: PublishOptions = {}): FileSnapshot {
    return inOperation(() => this.#publication.create(path, bytes, maxBytes, options));
  }

  /**
   * Publishes a new folder holding `files` (name to bytes), whole or not at
   * all: a staged folder whose files are written and fsynced, the staged
   * folder fsynced, renamed into place, the parent fsynced. A crash leaves no
   * folder or the complete one, never a half-filled one.
   * @throws ContractError `conflict` (something is already at `path`), `refused` (bad name, unsafe path,
   * missing parent, a file over `maxBytes`).
   */
  createFolder(path: string, files: Readonly<Record<string, Uint8Array>>, maxBytes = DOCUMENT_BYTES): void {
    inOperation(() => this.#folderPublication.create(path, files, maxBytes));
  }

  /**
   * Replaces the file when it is still exactly `expected`: staged temp, fsync, rename over, folder fsync
   * (unless `options.syncFolder` is false).
   * The comparison runs right before the rename; callers that race other writers hold a lock around it.
   * @throws ContractError `conflict` (the file is not `expected`, or gone with its folder), `refused` (unsafe path or file, over `maxBytes`).
   */
  replace(
    path: string,
    expected: FileSnapshot,
    bytes: Uint8Array,
    maxBytes = DOCUMENT_BYTES,
    options: PublishOptions = {},
  ): FileSnapshot {
    return inOperation(() => this.#publication.replace(path, expected, bytes, maxBytes, options));
  }

  /**
   * Removes the file when it is still exactly `expected`: verify, unlink, folder fsync
   * (unless `options.syncFolder` is false).
   * @throws ContractError `conflict` (absent, also with its folder, or not `expected`), `refused` (unsafe path or file).
   */
  remove(path: string, expected: FileSnapshot, maxBytes = DOCUMENT_BYTES, options: PublishOptions = {}): void {
    inOperation(() => this.#publication.remove(path, expected, maxBytes, options));
  }

  /**
   * Unpublishes a folder that holds exactly `expected` (name to snapshot),
   * whole or not at all, the mirror of `createFolder`: every file verified,
   * the folder renamed into the staging folder (atomic), its old parent
   * fsynced, then the staged copy removed. A crash leaves the whole folder
   * in place or a staged leftover that `sweepStaging` removes.
   * @throws ContractError `conflict` (absent, another name in it, or a file not `expected`), `refused` (unsafe).
   */
  removeFolder(path: string, expected: Readonly<Record<string, FileSnapshot>>, maxBytes = DOCUMENT_BYTES): void {
    inOperation(() => this.#folderPublication.remove(path, expected, maxBytes));
  }

  /**
   * Proves the file is exactly `expected`, or absent when `expected` is undefined.
   * @throws ContractError `conflict` otherwise, `refused` for an unsafe path or file.
   */
  assert(path: string, expected: FileSnapshot | undefined, maxBytes = DOCUMENT_BYTES): void {
    inOperation(() => this.#reads.assert(path, expected, maxBytes));
  }

  /**
   * Whether the file is still the incarnation `expected` was read from (absent when `expected` is
   * undefined), by one lstat and without reading it: every publication here makes a new inode, and
   * a change in place moves the stamp's size or times. For a reader that proves nothing moved
   * between its reads; a writer compares by `assert` or by the compare-and-swap of its write.
   * @throws ContractError `refused` for a path outside the root.
   */
  unchanged(path: string, expected: FileSnapshot | undefined): boolean {
    return this.#reads.unchanged(path, expected);
  }

  /**
   * The names in a safe folder (empty when it does not exist), sorted; the staging folder is never listed.
   * An allowed entry is a name, or a pattern every allowed name of that family matches.
   * @throws ContractError `refused` when any name is not allowed, or the folder is unsafe.
   */
  entries(folder: string, allowed: readonly (string | RegExp)[]): string[] {
    return inOperation(() => this.#reads.entries(folder, allowed));
  }

  /**
   * What is in the staging folder, with each writer's liveness (`unknown`
   * for a name that names no writer of this host). Changes nothing.
   * @throws ContractError `refused` when the staging folder is unsafe.
   */
  stagingEntries(): StagingEntry[] {
    return inOperation(() => this.#staging.entries());
  }

  /**
   * Removes staging leftovers whose writer is `absent`; keeps those of live or
   * ambiguous writers and names it cannot read. Call it before trusting a file
   * that a dead writer may have left with a second link.
   * @throws ContractError `refused` when the staging folder is unsafe.
   */
  sweepStaging(): StagingSweep {
    return inOperation(() => this.#staging.sweep());
  }
}
