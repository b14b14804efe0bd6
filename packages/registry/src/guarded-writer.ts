import { dirname } from 'node:path';
import type { FileSnapshot, PrivateFiles, PublishOptions } from '@leasehold/private-files';

/**
 * The writes a registry transaction makes besides the table: the one
 * per-workspace publication that must not race it (a new workspace's service
 * folder, a plain tool's checkout lock and its removal, an upgrade's removal
 * of the old service folder). Each proves, right before its first system
 * call, that the registry lock is still the transaction's and `roots.json` is
 * as the transaction last saw it. The lock's holder proves its own lock, so
 * no caller can forget the proof or make it for a lock it does not hold.
 * Each write is private-files' call of the same name, with its defaults.
 */
export class GuardedWriter {
  readonly #files: PrivateFiles;
  readonly #prove: () => void;

  constructor(files: PrivateFiles, prove: () => void) {
    this.#files = files;
    this.#prove = prove;
  }

  /**
   * Publishes a new file exclusively, after the proof.
   * @throws ContractError `conflict` (the lock or the table moved, or something is already at `path`),
   * `refused` (unsafe path, missing folder, over `maxBytes`).
   */
  create(path: string, bytes: Uint8Array, maxBytes?: number): FileSnapshot {
    this.#prove();
    return this.#files.create(path, bytes, maxBytes);
  }

  /**
   * Removes the file when it is still exactly `expected`, after the proof.
   * @throws ContractError `conflict` (the lock or the table moved, or the file is absent or not
   * `expected`), `refused` (unsafe path or file).
   */
  remove(path: string, expected: FileSnapshot, maxBytes?: number, options?: PublishOptions): void {
    this.#prove();
    this.#files.remove(path, expected, maxBytes, options);
  }

  /**
   * Publishes a new folder holding `files`, whole or not at all, after the proof and after making
   * the missing folders above it (0700): a transaction that lost its lock makes nothing at all.
   * @throws ContractError `conflict` (the lock or the table moved, or something is already at
   * `path`), `refused` (bad name, unsafe path, a file over `maxBytes`).
   */
  publishFolder(path: string, files: Readonly<Record<string, Uint8Array>>, maxBytes?: number): void {
    this.#prove();
    this.#files.directory(dirname(path), true);
    this.#files.createFolder(path, files, maxBytes);
  }

  /**
   * Unpublishes a folder that holds exactly `expected` (name to snapshot), whole or not at all,
   * after the proof.
   * @throws ContractError `conflict` (the lock or the table moved, the folder is absent, holds
   * another name, or a file is not `expected`), `refused` (unsafe).
   */
  removeFolder(path: string, expected: Readonly<Record<string, FileSnapshot>>, maxBytes?: number): void {
    this.#prove();
    this.#files.removeFolder(path, expected, maxBytes);
  }
}
