import {
  ContractError,
  DOCUMENT_BYTES,
  PATHS_DOCUMENT_BYTES,
  decodeBytes,
  encode,
  localCapabilitySchema,
  type Phase,
  type Registration,
  type Reservation,
} from '@leasehold/contracts';
import { retryingReads, sameSnapshot, type FileSnapshot, type PrivateFiles } from '@leasehold/private-files';
import type { Registry, RegistryTransaction } from '@leasehold/registry';
import { NAMESPACE_ENTRIES, type WorkspacePlaces } from './places.js';
import { bounded, readServiceState, type ServiceState } from './service-state.js';

/** The files an owner holds, as it last wrote or read them; `undefined` means "must be absent". */
export interface OwnedFiles {
  format: FileSnapshot;
  config: FileSnapshot;
  hostConfig: FileSnapshot | undefined;
  registration: FileSnapshot;
  ownerLock: FileSnapshot | undefined;
  capability: FileSnapshot | undefined;
  checkoutLock: FileSnapshot | undefined;
}

/** The reservation part of a registration: what the registry row must equal. */
export function reservationOf(registration: Registration): Reservation {
  const { root, stateHome, configIdentity, endpoint, epoch, pid, host, processStart, ownerToken } = registration;
  return { root, stateHome, configIdentity, endpoint, epoch, pid, host, processStart, ownerToken };
}

/** Two reservations are the same when their canonical encodings are. */
export function sameReservation(a: Reservation | undefined, b: Reservation | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return Buffer.from(encode(a)).equals(Buffer.from(encode(b)));
}

// Each owned file's key is also the name of its path in WorkspacePlaces.
const OWNED_KEYS = ['format', 'config', 'hostConfig', 'registration', 'ownerLock', 'capability', 'checkoutLock'] as const;

/** The snapshot of each owned file in a state just read. */
export function snapshotsOf(state: ServiceState): Record<keyof OwnedFiles, FileSnapshot | undefined> {
  return {
    format: state.format?.snapshot,
    config: state.config?.snapshot,
    hostConfig: state.hostConfig,
    registration: state.registration?.snapshot,
    ownerLock: state.ownerLock?.snapshot,
    capability: state.capability?.snapshot,
    checkoutLock: state.checkoutLock?.snapshot,
  };
}

/**
 * Proof that this process owns one workspace for one epoch. Every method
 * re-asserts that the owner's files are exactly as it left them: an owner
 * whose files changed under it has lost its lease and must stop serving
 * without touching anything.
 */
export class OwnerLease {
  readonly #places: WorkspacePlaces;
  readonly #files: PrivateFiles;
  readonly #registry: Registry;
  readonly #owned: OwnedFiles;
  #registration: Registration;
  #ended: ContractError | undefined;
  #stopWatching: (() => void) | undefined;

  /** @internal Made by `ServiceCoordination.acquire`. */
  constructor(places: WorkspacePlaces, files: PrivateFiles, registry: Registry, registration: Registration, owned: OwnedFiles) {
    this.#places = places;
    this.#files = files;
    this.#registry = registry;
    this.#registration = registration;
    this.#owned = owned;
  }

  /** The registration as this owner last wrote it (no secret in it). */
  get registration(): Registration {
    return this.#registration;
  }

  /**
   * The owner's own endpoint, epoch and capability, from the capability file
   * it created, after `assert()`: what its transport checks clients against.
   * Holds the secret: never print it.
   * @throws ContractError as `assert`.
   */
  localAccess(): { endpoint: string; epoch: string; capability: string } {
    this.assert();
    const snapshot = this.#owned.capability;
    if (snapshot === undefined) throw new ContractError('unavailable', `${this.#places.capability}: not held`);
    const { capability } = decodeBytes(localCapabilitySchema, snapshot.bytes, DOCUMENT_BYTES, this.#places.capability);
    return { endpoint: this.#registration.endpoint, epoch: this.#registration.epoch, capability };
  }

  /**
   * Proves this process still owns the workspace: it is the registered
   * process; every service file and the checkout lock are exactly the
   * snapshots it took; the registry holds exactly its row and no retained
   * lock. Reads that race another writer are retried.
   * @throws ContractError `conflict` (a file changed), `quarantine` (a retained registry lock),
   * `unavailable` (released or lost), `refused` (a file became unsafe or malformed).
   */
  assert(): void {
    this.#assertActive();
    retryingReads(() => {
      this.#assertFiles();
      const lock = this.#registry.readLock();
      if (lock?.lock.retained === true) {
        throw new ContractError('quarantine', `${this.#registry.lockPath}: retained by a failed writer`);
      }
      // roots.json changes whenever other workspaces come and go: only our row is compared.
      const row = this.#registry.peek().entries.find((entry) => entry.root === this.#places.root);
      if (!sameReservation(row, reservationOf(this.#registration))) {
        throw new ContractError('conflict', `${this.#registry.rootsPath}: this owner's row changed`);
      }
    });
  }

  /**
   * Moves the registration to phase `p` by compare-and-swap.
   * @throws ContractError `refused` for `stopped` (use `release`), and whatever `assert` throws.
   */
  phase(p: Exclude<Phase, 'stopped'>): void {
    if ((p as Phase) === 'stopped') throw new ContractError('refused', 'phase: use release() to stop');
    this.assert();
    this.#writeRegistration({ ...this.#registration, phase: p });
  }

  /**
   * Releases the workspace inside a registry transaction, in the order that
   * keeps every crash point fenced: registration `stopped`, row removed,
   * capability, `owner.lock`, and the checkout lock last. Every step
   * re-asserts the lease and the registry.
   * @throws ContractError as `assert`, `busy`/`quarantine` from the registry lock.
   */
  async release(): Promise<void> {
    this.#stopWatching?.();
    this.#assertActive();
    await this.#registry.transaction((transaction) => {
      const step = () => this.#assertWithin(transaction);
      step();
      const remaining = transaction.entries.filter((entry) => entry.root !== this.#places.root);
      const own = transaction.entries.filter((entry) => entry.root === this.#places.root);
      // Exactly one row for this root, and it is this owner's reservation: a changed row means
      // the lease is lost, and a lost owner touches nothing.
      if (own.length !== 1 || !sameReservation(own[0], reservationOf(this.#registration))) {
        throw new ContractError('conflict', `${this.#registry.rootsPath}: not exactly this owner's row for this root`);
      }
      const stopped: Registration = { ...this.#registration, phase: 'stopped' };
      this.#encodeRegistration(stopped);
      transaction.encodeEntries(remaining);
      transaction.markDirty();
      this.#writeRegistration(stopped);
      step();
      transaction.writeEntries(remaining);
      this.#removeOwned('capability', this.#places.capability, step);
      this.#removeOwned('ownerLock', this.#places.ownerLock, step);
      // The checkout lock goes last: until then, plain tools stay blocked.
      this.#removeOwned('checkoutLock', this.#places.checkoutLock, step);
      this.#ended = new ContractError('unavailable', `${this.#places.root}: the lease was released`);
    });
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
        this.#ended ??= ContractError.is(error) ? error : new ContractError('conflict', 'the lease could not be asserted', { cause: error });
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
    if (this.#registration.pid !== process.pid) {
      throw new ContractError('conflict', `${this.#places.registration}: names another process`);
    }
  }

  #assertFiles(): void {
    this.#files.entries(this.#places.namespace, NAMESPACE_ENTRIES);
    const current = snapshotsOf(readServiceState(this.#files, this.#places));
    for (const key of OWNED_KEYS) {
      if (!sameSnapshot(current[key], this.#owned[key])) {
        throw new ContractError('conflict', `${this.#places[key]}: changed under its owner`);
      }
    }
  }

  #assertWithin(transaction: RegistryTransaction): void {
    this.#assertFiles();
    transaction.assertHeld();
  }

  #encodeRegistration(registration: Registration): Uint8Array {
    return bounded(encode(registration), PATHS_DOCUMENT_BYTES, this.#places.registration);
  }

  #writeRegistration(next: Registration): void {
    const bytes = this.#encodeRegistration(next);
    this.#owned.registration = this.#files.replace(
      this.#places.registration,
      this.#owned.registration,
      bytes,
      PATHS_DOCUMENT_BYTES,
    );
    this.#registration = next;
  }

  #removeOwned(key: 'capability' | 'ownerLock' | 'checkoutLock', path: string, step: () => void): void {
    step();
    const expected = this.#owned[key];
    if (expected === undefined) throw new ContractError('conflict', `${path}: not held`);
    this.#files.remove(path, expected, DOCUMENT_BYTES);
    this.#owned[key] = undefined;
  }
}
