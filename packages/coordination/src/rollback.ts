import { ContractError, SERVICE_FILE_NAMES, sha256, type Reservation } from '@leasehold/contracts';
import type { FileSnapshot } from '@leasehold/private-files';
import type { RegistryTransaction } from '@leasehold/registry';
import { FILE_BYTES, filesOf, type FenceFile } from './service-state.js';
import type { Workspace } from './workspace.js';

type Undo = (transaction: RegistryTransaction | undefined) => void;

/**
 * What one acquire wrote, undone in reverse order when a later step fails.
 * Each undo is registered before its write, so a write that failed after it
 * took effect (an fsync error after the rename or link) is undone too; each
 * undo touches a file only while it holds exactly the bytes this call wrote
 * (the owner's files carry fresh random tokens, so no other writer's file can
 * match; a new workspace's service folder carries none, so its undo also
 * proves the registry lock first, through the transaction's writer), and
 * does nothing when the write never happened. The row is undone last: until
 * then it fences every other file. A failing undo stops the rollback there,
 * leaving the rest fenced by the row for `recover` once this process exits.
 */
export class Rollback {
  readonly #workspace: Workspace;
  readonly #reservation: Reservation;
  readonly #undo: Undo[] = [];

  constructor(workspace: Workspace, reservation: Reservation) {
    this.#workspace = workspace;
    this.#reservation = reservation;
  }

  /** The row: removed exactly, in the acquire's own transaction or in a new one. */
  row(): void {
    this.#undo.push((transaction) => {
      if (transaction === undefined) throw new ContractError('conflict', 'the row is undone in a transaction');
      const { root, epoch } = this.#reservation;
      if (transaction.rowOf(root)?.epoch === epoch || this.#workspace.registry.rowOf(root).row?.epoch === epoch) {
        transaction.unreserve(root, epoch);
      }
    });
  }

  /**
   * The service folder of a new workspace, with the host config `initializeNew` may have added.
   * Undone in the acquire's transaction, it is removed by the transaction's writer, which proves
   * the lock first: registered before the publication, this undo runs also when the publication's
   * own proof failed, and a transaction that lost its lock must not remove a folder another
   * process published with the same bytes.
   */
  serviceFolder(bytes: { readonly format: Uint8Array; readonly config: Uint8Array }, policyIdentity: string): void {
    this.#undo.push((transaction) => {
      const { service } = this.#workspace.places;
      if (!this.#workspace.files.directory(service)) return;
      const format = this.#ours('format', bytes.format);
      const config = this.#ours('config', bytes.config);
      const hostConfig = this.#workspace.files.read(this.#workspace.places.hostConfig, FILE_BYTES.hostConfig);
      if (
        format === undefined ||
        config === undefined ||
        (hostConfig !== undefined && hostConfig.identity !== policyIdentity)
      ) {
        throw new ContractError('conflict', `${service}: not the folder this acquire published`);
      }
      const expected: Record<string, FileSnapshot> = {
        [SERVICE_FILE_NAMES.format]: format,
        [SERVICE_FILE_NAMES.config]: config,
      };
      if (hostConfig !== undefined) expected[SERVICE_FILE_NAMES.hostConfig] = hostConfig;
      (transaction?.writer ?? this.#workspace.files).removeFolder(service, expected, FILE_BYTES.format);
    });
  }

  /** A file this acquire creates. */
  file(key: FenceFile, bytes: Uint8Array): void {
    this.#undo.push(() => {
      const current = this.#ours(key, bytes);
      if (current !== undefined)
        filesOf(this.#workspace, key).remove(this.#workspace.places[key], current, FILE_BYTES[key]);
    });
  }

  /**
   * The folder's mark, created exclusively: removed when it is the one this acquire wrote; a mark
   * with other bytes is another ownership's, whose create won, and stays.
   */
  mark(bytes: Uint8Array): void {
    this.#undo.push(() => {
      const { marks, places } = this.#workspace;
      const current = marks.read(places.mark, FILE_BYTES.mark);
      if (current !== undefined && current.identity === sha256(bytes))
        marks.remove(places.mark, current, FILE_BYTES.mark);
    });
  }

  /** The registration, created, or replacing a stopped one that is put back. */
  registration(bytes: Uint8Array, previous: FileSnapshot | undefined): void {
    this.#undo.push(() => {
      const path = this.#workspace.places.registration;
      // Still the stopped registration it was to replace: the replace never happened.
      if (
        previous !== undefined &&
        this.#workspace.files.read(path, FILE_BYTES.registration)?.identity === previous.identity
      )
        return;
      const current = this.#ours('registration', bytes);
      if (current === undefined) return;
      if (previous === undefined) this.#workspace.files.remove(path, current, FILE_BYTES.registration);
      else this.#workspace.files.replace(path, current, previous.bytes, FILE_BYTES.registration);
    });
  }

  /** Undoes everything registered so far inside the acquire's registry transaction. */
  runWithin(transaction: RegistryTransaction): void {
    try {
      for (let undo = this.#undo.pop(); undo !== undefined; undo = this.#undo.pop()) undo(transaction);
    } catch {
      // Left as it is: the row still fences what remains (see the class comment).
    }
    this.#undo.length = 0;
  }

  /**
   * Undoes everything registered so far, after the acquire's transaction: the row in a new one.
   * Answers whether every undo went through.
   */
  async run(): Promise<boolean> {
    try {
      const row = this.#undo.shift();
      for (let undo = this.#undo.pop(); undo !== undefined; undo = this.#undo.pop()) undo(undefined);
      if (row !== undefined)
        await this.#workspace.registry.transaction(this.#reservation.root, (transaction) => row(transaction));
      return true;
    } catch {
      // As in runWithin: a failed undo leaves the rest fenced.
      this.#undo.length = 0;
      return false;
    }
  }

  /** The file at `key` when it holds exactly `bytes`; undefined when absent; `conflict` when another file is there. */
  #ours(key: FenceFile, bytes: Uint8Array): FileSnapshot | undefined {
    const current = filesOf(this.#workspace, key).read(this.#workspace.places[key], FILE_BYTES[key]);
    if (current === undefined) return undefined;
    if (current.identity !== sha256(bytes))
      throw new ContractError('conflict', `${this.#workspace.places[key]}: not the file this acquire wrote`);
    return current;
  }
}
