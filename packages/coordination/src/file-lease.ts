import {
  ContractError,
  decodeBytes,
  encode,
  localCapabilitySchema,
  type LocalAccess,
  type Phase,
  type Registration,
} from '@leasehold/contracts';
import {
  fileOperation,
  processIdentity,
  retryingReads,
  sameSnapshot,
  type FileSnapshot,
} from '@leasehold/private-files';
import { FenceWriter, releaseInOrder, type HeldFences } from './release.js';
import {
  FILE_BYTES,
  FENCE_FILES,
  documentOf,
  readServiceSnapshots,
  reservationOf,
  sameReservation,
  type FenceFile,
} from './service-state.js';
import type { Workspace } from './workspace.js';

/** The files an owner holds, as it last wrote or read them; `undefined` means "must be absent". */
export type OwnedFiles = Record<FenceFile, FileSnapshot | undefined>;

/**
 * Proof that this process owns one workspace for one epoch. Every method
 * re-asserts that the owner's files and its row are exactly as it left them:
 * an owner whose files changed under it has lost its lease and must stop
 * serving without touching anything.
 */
export class FileLease {
  readonly #workspace: Workspace;
  // The owner's fences as it last wrote them; once release has removed the row, it must be absent.
  readonly #held: HeldFences & { registration: Registration };
  readonly #writer: FenceWriter;
  #ended: ContractError | undefined;
  #stopWatching: (() => void) | undefined;

  /** @internal Made by `acquireWorkspace`. */
  constructor(workspace: Workspace, registration: Registration, owned: OwnedFiles) {
    this.#workspace = workspace;
    this.#held = { snapshots: owned, registration, row: reservationOf(registration) };
    this.#writer = new FenceWriter(workspace, owned, true);
  }

  /** The registration as this owner last wrote it (no secret in it). */
  get registration(): Registration {
    return this.#held.registration;
  }

  /**
   * The owner's own endpoint, epoch and capability, from the capability file
   * it created, after `assert()`: what its transport checks clients against.
   * Holds the secret: never print it.
   * @throws ContractError as `assert`; `unavailable` once release removed the capability.
   */
  localAccess(): LocalAccess {
    this.assert();
    const snapshot = this.#held.snapshots.capability;
    if (snapshot === undefined)
      throw new ContractError('unavailable', `${this.#workspace.places.capability}: not held`);
    const { capability } = decodeBytes(
      localCapabilitySchema,
      snapshot.bytes,
      FILE_BYTES.capability,
      this.#workspace.places.capability,
    );
    return { endpoint: this.#held.registration.endpoint, epoch: this.#held.registration.epoch, capability };
  }

  /**
   * Proves this process still owns the workspace: it is the registered
   * process; the state home is safe; its row is exactly in the table; every
   * service file and the checkout lock are exactly the snapshots it took.
   * Reads that race another writer are retried.
   * @throws ContractError `conflict` (a file or the row changed), `unavailable` (released or lost),
   * `refused` (a file or the state home became unsafe or malformed).
   */
  assert(): void {
    this.#assertActive();
    fileOperation(() => retryingReads(() => this.#assertOnce()));
  }

  /**
   * Moves the registration to phase `p` by compare-and-swap.
   * @throws ContractError `refused` for `stopped` (use `release`), and whatever `assert` throws.
   */
  phase(p: Exclude<Phase, 'stopped'>): void {
    if ((p as Phase) === 'stopped') throw new ContractError('refused', 'phase: use release() to stop');
    fileOperation(() => {
      this.assert();
      this.#writeRegistration({ ...this.#held.registration, phase: p, version: this.#held.registration.version + 1 });
    });
  }

  /**
   * Fences the workspace with process `pid` of this host too: `companion.json`, naming this
   * epoch and that process (its start time read now), created exclusively and durably. From then
   * on `assert` checks it like every other file of the owner, a recovery counts that process as a
   * holder (and refuses while it is live), and `release` removes it first. One per lease.
   * @throws ContractError `refused` (the process is gone, or this lease already fences one),
   * `unavailable` (a release has begun), and whatever `assert` throws.
   */
  fenceProcess(pid: number): void {
    fileOperation(() => this.#fenceProcess(pid));
  }

  #fenceProcess(pid: number): void {
    this.assert();
    if (this.#held.registration.phase === 'stopped')
      throw new ContractError('unavailable', `${this.#workspace.places.root}: the lease is being released`);
    const path = this.#workspace.places.companion;
    if (this.#held.snapshots.companion !== undefined)
      throw new ContractError('refused', `${path}: this lease already fences a process (one per lease)`);
    const identity = processIdentity(pid);
    if (identity === undefined)
      throw new ContractError('refused', `pid ${pid}: no such process on this host (gone, or never was)`);
    // A create whose link took effect but whose folder fsync failed counts as done, as in `phase`:
    // the fence exists, and what a power loss could take back names a process it killed anyway.
    this.#writer.create(
      'companion',
      encode({ schema: 'leasehold.companion/1', epoch: this.#held.registration.epoch, ...identity }),
    );
  }

  /**
   * Releases the workspace in the order that keeps every crash point fenced
   * (`releaseInOrder`). Every step re-asserts the lease. A release that failed
   * part-way can be called again and goes on from where it stopped. A step
   * whose write took effect but whose fsync failed counts as done: every state
   * it may leave after a power loss is one of the fenced states of that order.
   * @throws ContractError as `assert`, `busy`/`quarantine` from the registry lock.
   */
  async release(): Promise<void> {
    this.#stopWatching?.();
    this.#assertActive();
    // releaseInOrder is one operation of private-files: the folders are walked once.
    await releaseInOrder(this.#workspace, this.#held, {
      check: () => this.assert(),
      settles: true,
      removesCheckout: true,
    });
    this.#ended = new ContractError('unavailable', `${this.#workspace.places.root}: the lease was released`);
  }

  /**
   * Re-asserts every `intervalMs` and calls `onLost(error)` once when the
   * owner's files changed under it (as PostgreSQL re-checks its pid file).
   * The timer does not keep the process alive. Returns a function that stops watching.
   */
  watch(intervalMs: number, onLost: (error: unknown) => void): () => void {
    this.#stopWatching?.();
    const timer = setInterval(() => {
      try {
        this.assert();
      } catch (error) {
        stop();
        this.#ended ??= ContractError.is(error)
          ? error
          : new ContractError('conflict', 'the lease could not be asserted', { cause: error });
        onLost(error);
      }
    }, intervalMs);
    timer.unref();
    const stop = () => {
      clearInterval(timer);
      if (this.#stopWatching === stop) this.#stopWatching = undefined;
    };
    this.#stopWatching = stop;
    return stop;
  }

  #assertActive(): void {
    if (this.#ended !== undefined) throw this.#ended;
    if (this.#held.registration.pid !== process.pid) {
      throw new ContractError('conflict', `${this.#workspace.places.registration}: names another process`);
    }
  }

  #assertOnce(): void {
    // The row first: reading it checks the state home itself before anything below it.
    const row = this.#workspace.registry.rowOf(this.#workspace.root).row;
    if (!sameReservation(row, this.#held.row)) {
      throw new ContractError('conflict', `${this.#workspace.places.roots}: this owner's row changed`);
    }
    // Every held snapshot was a valid document: only a file that differs is decoded, strictly, so
    // that a malformed one is `refused` and a valid new one is a change.
    const current = readServiceSnapshots(this.#workspace).snapshots;
    for (const key of FENCE_FILES) {
      if (!sameSnapshot(current[key], this.#held.snapshots[key])) {
        documentOf(key, this.#workspace.places[key], current[key]);
        throw new ContractError('conflict', `${this.#workspace.places[key]}: changed under its owner`);
      }
    }
  }

  #writeRegistration(next: Registration): void {
    this.#writer.replace('registration', encode(next));
    this.#held.registration = next;
  }
}
