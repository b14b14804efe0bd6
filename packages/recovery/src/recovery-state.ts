import {
  encode,
  sha256,
  type FenceKind,
  type Holder,
  type Phase,
  type Registration,
  type RecoveryFenceView,
  type RecoveryHolderView,
  type RecoveryView,
  type Reservation,
} from '@leasehold/contracts';
import { readServiceState, recoveringStateHome, type ServiceState, type Workspace } from '@leasehold/coordination';
import { ownerStatus, type FileSnapshot, type OwnerStatus } from '@leasehold/private-files';

/** The seam's `RecoveryView` as the files fill it: each fence one of `FENCE_KINDS`, each holder judged on this host. */
export interface FileRecoveryView extends RecoveryView {
  readonly fences: readonly (RecoveryFenceView & { readonly kind: FenceKind })[];
  readonly holders: readonly (RecoveryHolderView & { readonly verdict: OwnerStatus })[];
}

/**
 * What recovery would act on, read without the cross-file rules of the
 * selected state (recovery exists for the states that break them), every
 * file still strictly decoded: the seam's `view` (each fence a file, never
 * a secret), and the snapshots behind it, which its release compares every
 * file with and which never leave this package. `view.digest` covers this
 * root's row (its canonical bytes, or its absence) and the identity and stamp
 * of every other file listed, the capability by its stamp only; never the
 * rest of the table or the registry lock, so other workspaces coming and
 * going never change it. `view.clear`: nothing but the service format, config
 * and a stopped registration remain, nothing to recover.
 */
export interface RecoveryRead {
  readonly view: FileRecoveryView;
  readonly service: ServiceState;
  readonly row: Reservation | undefined;
  readonly initialisation: FileSnapshot | undefined;
  readonly ownersCheckout: boolean;
  /**
   * Whether the folder's mark is this recovery's to remove: it names this state home, or one that
   * is gone (deleted, another container's), whose own recovery can never run. Any other mark is
   * another ownership's, left to the recovery of the state home it names.
   */
  readonly marksFence: boolean;
}

/** Whether two fences name one process: the same pid, host and start time. */
export function sameHolder(a: Holder | undefined, b: Holder | undefined): boolean {
  return (
    a !== undefined && b !== undefined && a.pid === b.pid && a.host === b.host && a.processStart === b.processStart
  );
}

/** The process a document names. */
export function holderOf(value: { pid: number; host: string; processStart?: string | undefined }): Holder {
  return value.processStart === undefined
    ? { pid: value.pid, host: value.host }
    : { pid: value.pid, host: value.host, processStart: value.processStart };
}

/** A fence that still holds the workspace: anything but its format, its config and a stopped registration. */
export function holdsWorkspace(fence: RecoveryFenceView): boolean {
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

function digestOf(
  places: Workspace['places'],
  row: Reservation | undefined,
  files: ReadonlyArray<[string, FileSnapshot | undefined, boolean]>,
): string {
  const parts = files.map(([path, snapshot, secret]) =>
    snapshot === undefined
      ? { path, absent: true }
      : secret
        ? { path, stamp: snapshot.stamp }
        : { path, identity: snapshot.identity, stamp: snapshot.stamp },
  );
  return sha256(encode({ root: places.root, stateHome: places.stateHome, row: rowIdentity(row), files: parts }));
}

function holdersOf(fences: FileRecoveryView['fences']): FileRecoveryView['holders'] {
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
    verdict: ownerStatus(holder.pid, holder.host, holder.processStart),
    fences: named,
  }));
}

/**
 * Reads what fences the workspace. With `sweepStaging`, removes dead writers'
 * staging leftovers first (as every registry transaction does), so a crash
 * between a `link` and its temp's unlink reads as the whole file it published.
 */
export function readRecoveryState(workspace: Workspace, sweepStaging: boolean): RecoveryRead {
  const { files, registry, places } = workspace;
  if (sweepStaging) files.sweepStaging();
  const table = registry.list();
  const service = readServiceState(workspace);
  const row = table.entries.find((entry) => entry.root === places.root);
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
  const initialisation = table.roots === undefined ? table.format : undefined;
  const mark = service.mark;
  const marksFence = mark !== undefined && recoveringStateHome(mark.value, places) === places.stateHome;
  const fences: (RecoveryFenceView & { kind: FenceKind })[] = [];
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
    add(
      'owner-lock',
      places.ownerLock,
      owner !== undefined && owner.pid === named.pid && owner.host === named.host ? owner : named,
    );
  }
  if (service.capability !== undefined) add('capability', places.capability);
  // The companion names a process of its own: until it is gone, the workspace is in use.
  if (service.companion !== undefined) add('companion', places.companion, holderOf(service.companion.value));
  if (ownersCheckout) add('checkout-lock', places.checkoutLock, holderOf(checkout));
  if (marksFence) add('folder-mark', places.mark, holderOf(mark.value));
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
    [places.mark, marksFence ? mark.snapshot : undefined, false],
  ]);
  const clear = !fences.some(holdsWorkspace);
  return {
    view: { root: places.root, fences, holders: holdersOf(fences), digest, clear },
    service,
    row,
    initialisation,
    ownersCheckout,
    marksFence,
  };
}
