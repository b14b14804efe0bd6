import {
  ContractError,
  encode,
  sha256,
  type FenceKind,
  type Holder,
  type Phase,
  type Registration,
  type Reservation,
} from '@leasehold/contracts';
import { readServiceState, type ServiceState, type WorkspacePlaces } from '@leasehold/coordination';
import { ownerStatus, type FileSnapshot, type OwnerStatus, type PrivateFiles } from '@leasehold/private-files';
import type { Registry } from '@leasehold/registry';

/** A file that fences the workspace, and the process it names (never a secret). */
export interface RecoveryFence {
  readonly kind: FenceKind;
  readonly path: string;
  readonly holder?: Holder;
  readonly phase?: Phase;
}

/** A process some fence names, and whether it is still alive. */
interface RecoveryHolder {
  readonly holder: Holder;
  readonly status: OwnerStatus;
  readonly fences: readonly FenceKind[];
}

/**
 * What recovery would act on, read without the cross-file rules of the
 * selected state (recovery exists for the states that break them), every
 * file still strictly decoded. `digest` covers this root's row (its canonical
 * bytes, or its absence) and the identity and stamp of every other file
 * listed, the capability by its stamp only; never the rest of the table or
 * the registry lock, so other workspaces coming and going never change it.
 */
export interface RecoveryState {
  readonly root: string;
  readonly fences: readonly RecoveryFence[];
  readonly holders: readonly RecoveryHolder[];
  readonly digest: string;
  /** True when nothing but the service format, config and a stopped registration remain: nothing to recover. */
  readonly clear: boolean;
}

/** The snapshots behind a state handed out; they never leave this package. */
export interface RecoveryInternals {
  readonly places: WorkspacePlaces;
  readonly service: ServiceState;
  readonly row: Reservation | undefined;
  readonly initialisation: FileSnapshot | undefined;
  readonly ownersCheckout: boolean;
}

const internalsOf = new WeakMap<RecoveryState, RecoveryInternals>();

/** The snapshots of a state read by `readRecoveryState` for `places`, or `refused`. */
export function internalsFor(state: RecoveryState, places: WorkspacePlaces): RecoveryInternals {
  const internals = internalsOf.get(state);
  if (internals === undefined || internals.places.root !== places.root || internals.places.stateHome !== places.stateHome) {
    throw new ContractError('refused', `${places.root}: not a recovery state read for this workspace`);
  }
  return internals;
}

/** Whether two fences name one process: the same pid, host and start time. */
export function sameHolder(a: Holder | undefined, b: Holder | undefined): boolean {
  return a !== undefined && b !== undefined && a.pid === b.pid && a.host === b.host && a.processStart === b.processStart;
}

/** The process a document names. */
export function holderOf(value: { pid: number; host: string; processStart?: string | undefined }): Holder {
  return value.processStart === undefined
    ? { pid: value.pid, host: value.host }
    : { pid: value.pid, host: value.host, processStart: value.processStart };
}

/** A fence that still holds the workspace: anything but its format, its config and a stopped registration. */
export function holdsWorkspace(fence: RecoveryFence): boolean {
  return fence.kind !== 'service-format' && fence.kind !== 'service-config' && fence.phase !== 'stopped';
}

/** The canonical bytes of a row, hashed: what the digest and every later check compare. */
export function rowIdentity(row: Reservation | undefined): string | null {
  return row === undefined ? null : sha256(encode(row));
}

/**
 * The dead owner's identity: from a registration that is not stopped, else
 * the registry row, else a stopped registration. A stopped registration names
 * an earlier owner when an acquire over it died before replacing it: the row,
 * published first, names the one that died.
 */
function ownerOf(service: ServiceState, row: Holder | undefined): Holder | undefined {
  const registration = service.registration?.value;
  if (registration !== undefined && registration.phase !== 'stopped') return holderOf(registration);
  return row ?? (registration === undefined ? undefined : holderOf(registration));
}

function digestOf(places: WorkspacePlaces, row: Reservation | undefined, files: ReadonlyArray<[string, FileSnapshot | undefined, boolean]>): string {
  const parts = files.map(([path, snapshot, secret]) =>
    snapshot === undefined
      ? { path, absent: true }
      : secret
        ? { path, stamp: snapshot.stamp }
        : { path, identity: snapshot.identity, stamp: snapshot.stamp },
  );
  return sha256(encode({ root: places.root, stateHome: places.stateHome, row: rowIdentity(row), files: parts }));
}

function holdersOf(fences: readonly RecoveryFence[]): RecoveryHolder[] {
  const byKey = new Map<string, { holder: Holder; fences: FenceKind[] }>();
  for (const fence of fences) {
    if (fence.holder === undefined) continue;
    const key = JSON.stringify([fence.holder.pid, fence.holder.host, fence.holder.processStart ?? null]);
    const entry = byKey.get(key) ?? { holder: fence.holder, fences: [] };
    entry.fences.push(fence.kind);
    byKey.set(key, entry);
  }
  return [...byKey.values()].map(({ holder, fences: named }) => ({
    holder,
    status: ownerStatus(holder.pid, holder.host, holder.processStart),
    fences: named,
  }));
}

/**
 * Reads what fences `places.root`. With `sweepStaging`, removes dead writers'
 * staging leftovers first (as every registry transaction does), so a crash
 * between a `link` and its temp's unlink reads as the whole file it published.
 */
export function readRecoveryState(files: PrivateFiles, registry: Registry, places: WorkspacePlaces, sweepStaging: boolean): RecoveryState {
  if (sweepStaging) files.sweepStaging();
  const view = registry.list();
  const service = readServiceState(files, places);
  const row = view.entries.find((entry) => entry.root === places.root);
  const rowHolder = row === undefined ? undefined : holderOf(row);
  const owner = ownerOf(service, rowHolder);
  const registration: Registration | undefined = service.registration?.value;
  const checkout = service.checkoutLock?.value;
  // The owner's checkout lock, or any whose holder is provably gone (an
  // acquire that died after the checkout lock but before the registration
  // names it only by its process). A live plain tool's lock is never touched.
  const ownersCheckout =
    checkout !== undefined &&
    (checkout.token === registration?.checkoutToken ||
      sameHolder(holderOf(checkout), owner) ||
      ownerStatus(checkout.pid, checkout.host, checkout.processStart) === 'absent');
  const initialisation = view.roots === undefined ? view.format : undefined;
  const fences: RecoveryFence[] = [];
  const add = (kind: FenceKind, path: string, holder?: Holder, phase?: Phase) =>
    fences.push({ kind, path, ...(holder === undefined ? {} : { holder }), ...(phase === undefined ? {} : { phase }) });
  if (rowHolder !== undefined) add('registry-row', places.roots, rowHolder);
  if (initialisation !== undefined) add('registry-initialisation', places.registryFormat);
  if (service.format !== undefined) add('service-format', places.format);
  if (service.config !== undefined) add('service-config', places.config);
  if (registration !== undefined) {
    // A stopped registration names a process that released; it holds nothing.
    const holder = registration.phase === 'stopped' ? undefined : holderOf(registration);
    add('registration', places.registration, holder, registration.phase);
  }
  if (service.ownerLock !== undefined) {
    const named = holderOf(service.ownerLock.value);
    // owner.lock carries no process start: judge it by the owner's when it is the same process.
    add('owner-lock', places.ownerLock, owner !== undefined && owner.pid === named.pid && owner.host === named.host ? owner : named);
  }
  if (service.capability !== undefined) add('capability', places.capability);
  // The companion names a process of its own: until it is gone, the workspace is in use.
  if (service.companion !== undefined) add('companion', places.companion, holderOf(service.companion.value));
  if (ownersCheckout) add('checkout-lock', places.checkoutLock, holderOf(checkout));
  const digest = digestOf(places, row, [
    [places.registryFormat, initialisation, false],
    [places.format, service.format?.snapshot, false],
    [places.config, service.config?.snapshot, false],
    [places.hostConfig, service.hostConfig, false],
    [places.registration, service.registration?.snapshot, false],
    [places.ownerLock, service.ownerLock?.snapshot, false],
    [places.capability, service.capability?.snapshot, true],
    [places.companion, service.companion?.snapshot, false],
    [places.checkoutLock, service.checkoutLock?.snapshot, false],
  ]);
  const clear = !fences.some(holdsWorkspace);
  const state: RecoveryState = { root: places.root, fences, holders: holdersOf(fences), digest, clear };
  internalsOf.set(state, { places, service, row, initialisation, ownersCheckout });
  return state;
}
