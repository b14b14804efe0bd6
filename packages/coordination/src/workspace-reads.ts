import {
  ContractError,
  sha256,
  type Inspection,
  type LocalAccess,
  type OwnerConfig,
  type OwnerSummary,
  type Registration,
  type Reservation,
} from '@leasehold/contracts';
import { ownerStatus, retryingReads, type PrivateFiles } from '@leasehold/private-files';
import type { Registry } from '@leasehold/registry';
import { reservationOf, sameReservation } from './owner-lease.js';
import type { WorkspacePlaces } from './places.js';
import { SERVICE_FILES, checkServiceState, readServiceState, snapshotsOf, type FileSnapshots, type ServiceState } from './service-state.js';

/** The owner part of a registration (never a secret), with the verdict on its process (pid, start time, boot, namespace). */
export function summaryOf(registration: Registration): OwnerSummary {
  const { epoch, endpoint: where, pid, host, phase, processStart } = registration;
  return { epoch, endpoint: where, pid, host, phase, process: ownerStatus(pid, host, processStart) };
}

/** Why a read failed, for an `unavailable` answer: the code and message, or the system error code. */
export function reasonOf(error: unknown): string {
  if (ContractError.is(error)) return `${error.code}: ${error.message}`;
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'unknown';
  return `could not read the state (${code})`;
}

/**
 * What one workspace's files and its row of the table say, read without any
 * lock: the row read before and after the service state, so that a reader
 * never takes a state between two steps of a writer for an answer.
 */
export class WorkspaceReads {
  readonly #places: WorkspacePlaces;
  readonly #files: PrivateFiles;
  readonly #registry: Registry;

  constructor(places: WorkspacePlaces, files: PrivateFiles, registry: Registry) {
    this.#places = places;
    this.#files = files;
    this.#registry = registry;
  }

  /** What the files say of this workspace; see `ServiceCoordination.inspect`. */
  inspect(): Inspection {
    try {
      return retryingReads(() => this.#inspectOnce());
    } catch (error) {
      return { status: 'unavailable', reason: reasonOf(error) };
    }
  }

  /** The workspace's config, or undefined before `initialize`; see `ServiceCoordination.configuration`. */
  configuration(): OwnerConfig | undefined {
    return retryingReads(() => this.selectedState().config?.value);
  }

  /** Endpoint, epoch and capability of a registered owner; see `ServiceCoordination.localAccess`. */
  localAccess(): LocalAccess {
    try {
      return retryingReads(() => this.#localAccessOnce());
    } catch (error) {
      if (ContractError.is(error, 'unavailable')) throw error;
      throw new ContractError('unavailable', `${this.#places.root}: no local access (${reasonOf(error)})`);
    }
  }

  /** The current files as an owner's snapshots, when they are exactly the ownership of `reservation`. */
  wholeOwnership(reservation: Reservation, registrationBytes: Uint8Array): Required<FileSnapshots> | undefined {
    try {
      return retryingReads(() => {
        const { row, state } = this.#consistentRead();
        const whole = state.registration?.snapshot.identity === sha256(registrationBytes) && sameReservation(row, reservation);
        return whole ? snapshotsOf(state) : undefined;
      });
    } catch {
      return undefined;
    }
  }

  /** The service state, once the state home is proved safe and the state keeps every rule. */
  selectedState(): ServiceState {
    this.#registry.checkStateHome();
    const state = readServiceState(this.#files, this.#places);
    checkServiceState(state, this.#places);
    return state;
  }

  /**
   * The selected state as `selectedState` reads it, taking it from `earlier` (a read of this
   * workspace made before the caller took the registry lock) when every file is still the one
   * read then, proved by one lstat each: under the lock, nothing but that proof is read again.
   */
  selectedStateSince(earlier: ServiceState | undefined): ServiceState {
    if (earlier === undefined) return this.selectedState();
    const snapshots = snapshotsOf(earlier);
    const unmoved = SERVICE_FILES.every((key) => this.#files.unchanged(this.#places[key], snapshots[key]));
    return unmoved ? earlier : this.selectedState();
  }

  /**
   * This root's row and the selected state as one consistent read: the row
   * read before the state is still the row after it (files of this workspace
   * change only while its row is there, or in the transaction that adds or
   * removes it). A row that moved is a race with a writer, read again.
   */
  #consistentRead(): { row: Reservation | undefined; state: ServiceState } {
    // The table's read proves the state home first, so the state's read needs not prove it again.
    const { row, roots } = this.#registry.rowOf(this.#places.root);
    const state = readServiceState(this.#files, this.#places);
    checkServiceState(state, this.#places);
    // A table that is still the same file holds the same row; one replaced meanwhile (another
    // workspace's transaction, most often) is read again for this row alone.
    if (!this.#registry.tableUnchanged(roots) && !sameReservation(row, this.#registry.rowOf(this.#places.root).row)) {
      throw new ContractError('conflict', `${this.#places.roots}: this root's row changed while read`);
    }
    return { row, state };
  }

  #inspectOnce(): Inspection {
    let read: { row: Reservation | undefined; state: ServiceState };
    try {
      read = this.#consistentRead();
    } catch (error) {
      if (ContractError.is(error, 'conflict')) throw error;
      return this.#unavailable(reasonOf(error), this.#namedProcess());
    }
    const { row, state } = read;
    const registration = state.registration?.value;
    if (!state.service) {
      return row === undefined ? { status: 'absent' } : this.#unavailable('a registry row has no service state', row);
    }
    if (registration === undefined || registration.phase === 'stopped') {
      if (row !== undefined) return this.#unavailable('a registry row outlived its registration', row);
      return { status: 'stopped', epoch: registration?.epoch ?? null };
    }
    const owner = summaryOf(registration);
    if (!sameReservation(row, reservationOf(registration))) {
      return this.#unavailable('the registry row is not the registration', row ?? registration, owner);
    }
    if (registration.phase === 'idle') {
      return { status: 'unavailable', reason: 'idle: only the transport can prove a live owner', owner };
    }
    return { status: registration.phase, owner };
  }

  /**
   * The process the files name when they break a cross-file rule: the row's,
   * else the registration's (release removes the row just before the checkout
   * lock). When it is live, the state is that process between two steps.
   */
  #namedProcess(): Reservation | Registration | undefined {
    try {
      return this.#registry.rowOf(this.#places.root).row ?? readServiceState(this.#files, this.#places).registration?.value;
    } catch {
      return undefined;
    }
  }

  /**
   * An `unavailable` answer, marked in progress when the process the files
   * name is live (another step of its acquire or release is coming).
   */
  #unavailable(reason: string, holder?: { pid: number; host: string; processStart?: string | undefined }, owner?: OwnerSummary): Inspection {
    const live = holder !== undefined && ownerStatus(holder.pid, holder.host, holder.processStart) === 'live';
    return {
      status: 'unavailable',
      reason,
      ...(owner === undefined ? {} : { owner }),
      ...(live ? { inProgress: true as const } : {}),
    };
  }

  #localAccessOnce(): LocalAccess {
    const { row, state } = this.#consistentRead();
    const registration = state.registration?.value;
    if (registration === undefined || registration.phase === 'stopped' || state.capability === undefined) {
      throw new ContractError('unavailable', `${this.#places.root}: no registered owner`);
    }
    if (!sameReservation(row, reservationOf(registration))) {
      throw new ContractError('unavailable', `${this.#places.root}: the registry row is not the registration`);
    }
    return { endpoint: registration.endpoint, epoch: registration.epoch, capability: state.capability.value.capability };
  }
}
