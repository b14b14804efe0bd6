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
import { fileOperation, ownerStatus, retryingReads } from '@leasehold/private-files';
import {
  FENCE_FILES,
  checkServiceState,
  filesOf,
  readServiceState,
  reservationOf,
  sameReservation,
  snapshotsOf,
  type FileSnapshots,
  type ServiceState,
} from './service-state.js';
import { foreignMark, markedHere, markedOwnership } from './folder-mark.js';
import type { Workspace } from './workspace.js';

/** The owner part of a registration (never a secret), with the verdict on its process (pid, start time, boot, namespace). */
export function summaryOf(registration: Registration): OwnerSummary {
  const { epoch, endpoint: where, pid, host, phase, processStart, version } = registration;
  return { epoch, endpoint: where, pid, host, phase, process: ownerStatus(pid, host, processStart), version };
}

/** Why a read failed, for an `unavailable` answer: the code and message, or the system error code. */
export function reasonOf(error: unknown): string {
  if (ContractError.is(error)) return `${error.code}: ${error.message}`;
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'unknown';
  return `could not read the state (${code})`;
}

// What one workspace's files and its row of the table say, read without any lock: the row read
// before and after the service state, so that a reader never takes a state between two steps of a
// writer for an answer.

/**
 * What the files say of this workspace. Never throws: anything it cannot
 * prove (a state between two steps of another process, a change while
 * reading, any broken rule, an unsafe state home) is `unavailable`. A live
 * owner in phase `idle` is `unavailable` too: files alone cannot prove a
 * live, authenticated owner; a client proves that over the transport. Other
 * workspaces' transactions never change the answer: it reads only this
 * root's row of the table.
 */
export function inspectWorkspace(workspace: Workspace): Inspection {
  try {
    return fileOperation(() => retryingReads(() => inspectOnce(workspace)));
  } catch (error) {
    return { status: 'unavailable', reason: reasonOf(error) };
  }
}

/**
 * The workspace's config, or undefined before `initializeWorkspace`.
 * @throws ContractError `refused` for an invalid state, `conflict` when files kept changing.
 */
export function workspaceConfiguration(workspace: Workspace): OwnerConfig | undefined {
  return fileOperation(() => retryingReads(() => selectedState(workspace).config?.value));
}

/**
 * Endpoint, epoch and capability of a registered, not stopped owner whose
 * exact row is in the table.
 * @throws ContractError `unavailable` otherwise (the message says why, never the secret).
 */
export function workspaceLocalAccess(workspace: Workspace): LocalAccess {
  try {
    return fileOperation(() => retryingReads(() => localAccessOnce(workspace)));
  } catch (error) {
    if (ContractError.is(error, 'unavailable')) throw error;
    throw new ContractError('unavailable', `${workspace.root}: no local access (${reasonOf(error)})`);
  }
}

/** The current files as an owner's snapshots, when they are exactly the ownership of `reservation`. */
export function wholeOwnership(
  workspace: Workspace,
  reservation: Reservation,
  registrationBytes: Uint8Array,
): Required<FileSnapshots> | undefined {
  try {
    return retryingReads(() => {
      const { row, state } = consistentRead(workspace);
      const whole =
        state.registration?.snapshot.identity === sha256(registrationBytes) && sameReservation(row, reservation);
      return whole ? snapshotsOf(state) : undefined;
    });
  } catch {
    return undefined;
  }
}

/** The service state, once the state home is proved safe and the state keeps every rule. */
export function selectedState(workspace: Workspace): ServiceState {
  workspace.registry.checkStateHome();
  const state = readServiceState(workspace);
  checkServiceState(state, workspace.places);
  return state;
}

/**
 * The selected state as `selectedState` reads it, taking it from `earlier` (a read of this
 * workspace made before the caller took the registry lock) when every file is still the one
 * read then, proved by one lstat each: under the lock, nothing but that proof is read again.
 */
export function selectedStateSince(workspace: Workspace, earlier: ServiceState | undefined): ServiceState {
  if (earlier === undefined) return selectedState(workspace);
  const snapshots = snapshotsOf(earlier);
  const unmoved = FENCE_FILES.every((key) => filesOf(workspace, key).unchanged(workspace.places[key], snapshots[key]));
  return unmoved ? earlier : selectedState(workspace);
}

/**
 * This root's row and the selected state as one consistent read: the row
 * read before the state is still the row after it (files of this workspace
 * change only while its row is there, or in the transaction that adds or
 * removes it). A row that moved is a race with a writer, read again.
 */
function consistentRead(workspace: Workspace): { row: Reservation | undefined; state: ServiceState } {
  const { registry, places } = workspace;
  // The table's read proves the state home first, so the state's read needs not prove it again.
  const { row, roots } = registry.rowOf(places.root);
  const state = readServiceState(workspace);
  checkServiceState(state, places);
  // A table that is still the same file holds the same row; one replaced meanwhile (another
  // workspace's transaction, most often) is read again for this row alone.
  if (!registry.tableUnchanged(roots) && !sameReservation(row, registry.rowOf(places.root).row)) {
    throw new ContractError('conflict', `${places.roots}: this root's row changed while read`);
  }
  return { row, state };
}

function inspectOnce(workspace: Workspace): Inspection {
  let read: { row: Reservation | undefined; state: ServiceState };
  try {
    read = consistentRead(workspace);
  } catch (error) {
    if (ContractError.is(error, 'conflict')) throw error;
    return unavailable(reasonOf(error), namedProcess(workspace));
  }
  const answer = inspectState(read);
  return answer.status === 'absent' || answer.status === 'stopped'
    ? markedAnswer(workspace, read.state, answer)
    : answer;
}

/**
 * What a folder that this state home holds no ownership of answers when a mark fences it: a mark
 * of this state home that outlived its registration (the passing state of an acquire or release,
 * or a crash's leftover), or one on it or above it that names another ownership (SPEC 5.1a).
 */
function markedAnswer(workspace: Workspace, state: ServiceState, answer: Inspection): Inspection {
  const own = state.mark;
  // A plain tool's mark, beside its checkout lock, holds no service: the answer stays.
  if (own !== undefined && own.value.epoch === state.checkoutLock?.value.token) return answer;
  if (own !== undefined && markedHere(own.value, workspace)) {
    // Another host's mark of the same etcd cluster (a folder shared between hosts): the etcd fence says the rest.
    if (own.value.stateHome !== workspace.places.stateHome) return answer;
    return unavailable('the folder mark outlived its registration', own.value);
  }
  const foreign = foreignMark(workspace, own);
  if (foreign === undefined) return answer;
  const marked = markedOwnership(workspace.places, foreign.root, foreign.mark);
  const through = `state home ${marked.stateHome}${marked.backend === 'etcd' ? ' (etcd backend)' : ''}`;
  return {
    status: 'unavailable',
    reason: `owned through ${through}: ${foreign.root} is held by pid ${marked.pid} on host ${marked.host} (${marked.process})`,
    marked,
  };
}

function inspectState(read: { row: Reservation | undefined; state: ServiceState }): Inspection {
  const { row, state } = read;
  const registration = state.registration?.value;
  if (!state.service) {
    return row === undefined ? { status: 'absent' } : unavailable('a registry row has no service state', row);
  }
  if (registration === undefined || registration.phase === 'stopped') {
    if (row !== undefined) return unavailable('a registry row outlived its registration', row);
    return registration === undefined
      ? { status: 'stopped', epoch: null }
      : { status: 'stopped', epoch: registration.epoch, version: registration.version };
  }
  const owner = summaryOf(registration);
  if (!sameReservation(row, reservationOf(registration))) {
    return unavailable('the registry row is not the registration', row ?? registration, owner);
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
function namedProcess(workspace: Workspace): Reservation | Registration | undefined {
  try {
    return workspace.registry.rowOf(workspace.root).row ?? readServiceState(workspace).registration?.value;
  } catch (error) {
    // A file replaced while read (the table, by another workspace's transaction, most often): the
    // whole read is made again, lest a live writer's passing state be answered as not in progress.
    if (ContractError.is(error, 'conflict')) throw error;
    return undefined;
  }
}

/**
 * An `unavailable` answer, marked in progress when the process the files
 * name is live (another step of its acquire or release is coming).
 */
function unavailable(
  reason: string,
  holder?: { pid: number; host: string; processStart?: string | undefined },
  owner?: OwnerSummary,
): Inspection {
  const live = holder !== undefined && ownerStatus(holder.pid, holder.host, holder.processStart) === 'live';
  return {
    status: 'unavailable',
    reason,
    ...(owner === undefined ? {} : { owner }),
    ...(live ? { inProgress: true as const } : {}),
  };
}

function localAccessOnce(workspace: Workspace): LocalAccess {
  const { row, state } = consistentRead(workspace);
  const registration = state.registration?.value;
  if (registration === undefined || registration.phase === 'stopped' || state.capability === undefined) {
    throw new ContractError('unavailable', `${workspace.root}: no registered owner`);
  }
  if (!sameReservation(row, reservationOf(registration))) {
    throw new ContractError('unavailable', `${workspace.root}: the registry row is not the registration`);
  }
  return { endpoint: registration.endpoint, epoch: registration.epoch, capability: state.capability.value.capability };
}
