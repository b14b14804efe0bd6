import { randomUUID } from 'node:crypto';
import {
  ContractError,
  DOCUMENT_BYTES,
  checkoutLockSchema,
  decodeBytes,
  encode,
  recoverRemedy,
  type CheckoutLock,
  type WorkspacePlaces,
} from '@leasehold/contracts';
import {
  currentProcess,
  fileOperation,
  ownerStatus,
  retryingReads,
  sameSnapshot,
  type FileSnapshot,
  type OwnerStatus,
  type PrivateFiles,
} from '@leasehold/private-files';
import { markBytes, markedHere, publishMark, refuseForeignMarks } from './folder-mark.js';
import { FILE_BYTES, checkServiceState, readServiceState } from './service-state.js';
import { openWorkspace, type CoordinationOptions, type Workspace } from './workspace.js';

/** A checkout lock as found, with its holder's liveness. */
export interface CheckoutHolder {
  readonly snapshot: FileSnapshot;
  readonly lock: CheckoutLock;
  readonly verdict: OwnerStatus;
}

/** A checkout lock this process holds, with the folder's mark it holds it by in every state home. */
export class CheckoutHandle {
  readonly token: string;
  readonly #workspace: Workspace;
  #snapshot: FileSnapshot | undefined;
  #mark: FileSnapshot | undefined;

  /** @internal Made by `Checkout.acquire`. */
  constructor(workspace: Workspace, token: string, snapshot: FileSnapshot) {
    this.#workspace = workspace;
    this.token = token;
    this.#snapshot = snapshot;
  }

  /** @internal The folder's mark, once `Checkout.acquire` published it. */
  holdMark(mark: FileSnapshot): void {
    this.#mark = mark;
  }

  /**
   * Proves the lock, and the folder's mark, are still exactly the ones this process created.
   * @throws ContractError `conflict` (changed, removed or released), `refused` (unsafe file).
   */
  assertOwner(): void {
    const { files, marks, places } = this.#workspace;
    if (this.#snapshot === undefined) throw new ContractError('conflict', `${places.checkoutLock}: released`);
    files.assert(places.checkoutLock, this.#snapshot);
    if (this.#mark !== undefined) marks.assert(places.mark, this.#mark, FILE_BYTES.mark);
  }

  /**
   * Removes the folder's mark, then the lock, each by compare-and-swap: until the lock goes, it
   * fences the folder in this state home.
   * @throws ContractError `conflict` when either is no longer this process's.
   */
  release(): void {
    const { files, marks, places } = this.#workspace;
    if (this.#snapshot === undefined) throw new ContractError('conflict', `${places.checkoutLock}: released`);
    if (this.#mark !== undefined) marks.remove(places.mark, this.#mark, FILE_BYTES.mark);
    this.#mark = undefined;
    files.remove(places.checkoutLock, this.#snapshot);
    this.#snapshot = undefined;
  }
}

/**
 * The plain single-writer lock of a workspace, for tools that are not
 * services (a formatter, a migration). A service owner holds it for its whole
 * life, so such tools stay blocked while a service owns the workspace.
 * Taking and breaking it runs under the registry lock, so it never races a
 * service's acquire.
 */
export class Checkout {
  readonly places: WorkspacePlaces;
  readonly #workspace: Workspace;
  readonly #files: PrivateFiles;

  /** @throws ContractError `refused` for a root or state home that is not absolute and normalised, or an invalid `backend`. */
  constructor(root: string, options: CoordinationOptions = {}) {
    this.#workspace = openWorkspace(root, options);
    this.places = this.#workspace.places;
    this.#files = this.#workspace.files;
  }

  /**
   * Takes the checkout lock.
   * @throws ContractError `conflict` (held, by a tool or a service), `refused` (invalid state),
   * `busy`/`quarantine` from the registry lock.
   */
  async acquire(): Promise<CheckoutHandle> {
    // The folder's own fence (SPEC 5.1a): another state home's owner, or one above, refuses it too.
    refuseForeignMarks(this.#workspace);
    const handle = await this.#lock();
    // Then, outside the registry lock, the mark that holds the folder in every other state home.
    const owner = currentProcess();
    const bytes = markBytes(this.#workspace, { ...this.places, epoch: handle.token, ...owner });
    try {
      handle.holdMark(publishMark(this.#workspace, bytes));
    } catch (error) {
      handle.release();
      throw error;
    }
    return handle;
  }

  async #lock(): Promise<CheckoutHandle> {
    return this.#workspace.registry.transaction(this.places.root, (transaction) => {
      this.#workspace.registry.checkStateHome();
      const state = readServiceState(this.#workspace);
      checkServiceState(state, this.places);
      // A row fences the root from its reservation on, before the service's own checkout lock exists.
      if (transaction.rowOf(this.places.root) !== undefined) {
        throw new ContractError('conflict', `${this.places.roots}: a service holds this workspace`);
      }
      if (state.checkoutLock !== undefined) throw new ContractError('conflict', `${this.places.checkoutLock}: held`);
      const owner = currentProcess();
      const token = randomUUID();
      const bytes = encode({ schema: 'leasehold.checkout-lock/1', token, ...owner });
      this.#files.directory(this.places.privateRoot, true);
      // The transaction's writer proves the registry lock, then creates the lock.
      return new CheckoutHandle(this.#workspace, token, transaction.writer.create(this.places.checkoutLock, bytes));
    });
  }

  /**
   * The lock and its holder's liveness, or undefined when it is free.
   * @throws ContractError `refused` (malformed or unsafe), `conflict` (changing while read).
   */
  inspect(): CheckoutHolder | undefined {
    return fileOperation(() => retryingReads(() => this.#inspectOnce()));
  }

  #inspectOnce(): CheckoutHolder | undefined {
    const snapshot = this.#files.read(this.places.checkoutLock);
    if (snapshot === undefined) return undefined;
    const lock = decodeBytes(checkoutLockSchema, snapshot.bytes, DOCUMENT_BYTES, this.places.checkoutLock);
    return { snapshot, lock, verdict: ownerStatus(lock.pid, lock.host, lock.processStart) };
  }

  /**
   * Removes the lock seen as `snapshot`, only when its holder is `absent` and
   * it is a plain tool's: a service's checkout lock (its token is a
   * registration's, in any phase, or a row names this root) is lifted by
   * recovery, with the journal and the service's other fences.
   * @throws ContractError `conflict` (changed since `snapshot`, or its holder is live),
   * `quarantine` (holder ambiguous, or the lock belongs to a service), and registry lock errors.
   */
  async breakIfAbsent(snapshot: FileSnapshot): Promise<void> {
    await this.#workspace.registry.transaction(this.places.root, (transaction) => {
      const found = this.inspect();
      if (found === undefined || !sameSnapshot(found.snapshot, snapshot)) {
        throw new ContractError('conflict', `${this.places.checkoutLock}: changed since it was read`);
      }
      const registration = readServiceState(this.#workspace).registration?.value;
      const ofService =
        transaction.rowOf(this.places.root) !== undefined || registration?.checkoutToken === found.lock.token;
      if (ofService) {
        throw new ContractError('quarantine', `${this.places.checkoutLock}: held for a service; use recovery`, {
          remedy: recoverRemedy(this.places.root, this.places.stateHome, found.verdict),
        });
      }
      if (found.verdict === 'live')
        throw new ContractError('conflict', `${this.places.checkoutLock}: its holder is live`);
      if (found.verdict === 'ambiguous') {
        throw new ContractError('quarantine', `${this.places.checkoutLock}: its holder cannot be told from here`, {
          remedy: `once a person made sure pid ${found.lock.pid} on host ${found.lock.host} is gone, break the lock from its own host or PID namespace, the one place that proves it gone`,
        });
      }
      // The dead tool's mark first, as its release would have: the lock fences the folder until then.
      const mark = readServiceState(this.#workspace).mark;
      if (mark !== undefined && markedHere(mark.value, this.#workspace) && mark.value.epoch === found.lock.token) {
        this.#workspace.marks.remove(this.places.mark, mark.snapshot, FILE_BYTES.mark);
      }
      transaction.writer.remove(this.places.checkoutLock, snapshot);
    });
  }
}
