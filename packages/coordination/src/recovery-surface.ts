import {
  ContractError,
  DOCUMENT_BYTES,
  PATHS_DOCUMENT_BYTES,
  REGISTRY_BYTES,
  encode,
  sha256,
  type FenceKind,
  type Holder,
  type Phase,
  type Registration,
} from '@leasehold/contracts';
import { ownerStatus, type FileSnapshot, type OwnerStatus, type PrivateFiles } from '@leasehold/private-files';
import type { Registry, RegistryTransaction } from '@leasehold/registry';
import { HOST_CONFIG_BYTES, readServiceState, type ServiceState } from './service-state.js';
import { NAMESPACE_ENTRIES, type WorkspacePlaces } from './places.js';

/** A file that fences the workspace, and the process it names (never a secret). */
export interface RecoveryFence {
  readonly kind: FenceKind;
  readonly path: string;
  readonly holder?: Holder;
  readonly phase?: Phase;
}

/** A process some fence names, and whether it is still alive. */
export interface RecoveryHolder {
  readonly holder: Holder;
  readonly status: OwnerStatus;
  readonly fences: readonly FenceKind[];
}

/**
 * What recovery would act on, read without the cross-file rules of SPEC 5.2
 * (recovery exists for the states that break them), every file still
 * strictly decoded. `digest` covers the identity and stamp of every file
 * read — the capability by its stamp only — so any change in between is
 * seen. The exact snapshots stay inside this package: a caller can look, and
 * hand the state back to `releaseDeadOwner`, but cannot write with it.
 */
export interface RecoveryState {
  readonly root: string;
  readonly fences: readonly RecoveryFence[];
  readonly holders: readonly RecoveryHolder[];
  readonly digest: string;
  /** True when nothing but the service format, config and a stopped registration remain: nothing to recover. */
  readonly clear: boolean;
}

interface Internals {
  readonly places: WorkspacePlaces;
  readonly service: ServiceState;
  readonly registryLock: FileSnapshot | undefined;
  readonly registryFormat: FileSnapshot | undefined;
  readonly roots: FileSnapshot | undefined;
  readonly row: boolean;
  readonly ownersCheckout: boolean;
}

// The snapshots behind each state handed out; never exported from the package.
const internalsOf = new WeakMap<RecoveryState, Internals>();

function sameHolder(a: Holder | undefined, b: Holder | undefined): boolean {
  return a !== undefined && b !== undefined && a.pid === b.pid && a.host === b.host && a.processStart === b.processStart;
}

function holderOf(value: { pid: number; host: string; processStart?: string | undefined }): Holder {
  return value.processStart === undefined
    ? { pid: value.pid, host: value.host }
    : { pid: value.pid, host: value.host, processStart: value.processStart };
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

function digestOf(places: WorkspacePlaces, files: ReadonlyArray<[string, FileSnapshot | undefined, boolean]>): string {
  const parts = files.map(([path, snapshot, secret]) =>
    snapshot === undefined
      ? { path, absent: true }
      : secret
        ? { path, stamp: snapshot.stamp }
        : { path, identity: snapshot.identity, stamp: snapshot.stamp },
  );
  return sha256(encode({ root: places.root, stateHome: places.stateHome, files: parts }));
}

/**
 * Reads what fences `places.root`. With `sweepStaging`, removes dead writers'
 * staging leftovers first (as every registry transaction does), so a crash
 * between a `link` and its temp's unlink reads as the whole file it published.
 */
export function readRecoveryState(
  files: PrivateFiles,
  registry: Registry,
  places: WorkspacePlaces,
  sweepStaging: boolean,
): RecoveryState {
  if (sweepStaging) files.sweepStaging();
  files.entries(places.namespace, NAMESPACE_ENTRIES);
  const peek = registry.peek();
  const lock = registry.readLock();
  const service = readServiceState(files, places);
  const rowEntry = peek.entries.find((entry) => entry.root === places.root);
  const rowHolder = rowEntry === undefined ? undefined : holderOf(rowEntry);
  const owner = ownerOf(service, rowHolder);
  const registration: Registration | undefined = service.registration?.value;
  const checkout = service.checkoutLock?.value;
  // The owner's checkout lock, or any whose holder is provably gone: after an
  // earlier recovery died between owner.lock and the checkout lock, nothing
  // else names a crashed owner's lock. A live plain tool's lock is never touched.
  const ownersCheckout =
    checkout !== undefined &&
    (checkout.token === registration?.checkoutToken ||
      sameHolder(holderOf(checkout), owner) ||
      ownerStatus(checkout.pid, checkout.host, checkout.processStart) === 'absent');

  const fences: RecoveryFence[] = [];
  const add = (kind: FenceKind, path: string, holder?: Holder, phase?: Phase) =>
    fences.push({ kind, path, ...(holder === undefined ? {} : { holder }), ...(phase === undefined ? {} : { phase }) });
  if (lock !== undefined) add('registry-lock', registry.lockPath, holderOf(lock.lock));
  if (rowHolder !== undefined) add('registry-row', registry.rootsPath, rowHolder);
  if (peek.format !== undefined && peek.roots === undefined) add('registry-initialisation', registry.formatPath);
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
  if (ownersCheckout) add('checkout-lock', places.checkoutLock, holderOf(checkout));

  const byKey = new Map<string, { holder: Holder; fences: FenceKind[] }>();
  for (const fence of fences) {
    if (fence.holder === undefined) continue;
    const key = JSON.stringify([fence.holder.pid, fence.holder.host, fence.holder.processStart ?? null]);
    const entry = byKey.get(key) ?? { holder: fence.holder, fences: [] };
    entry.fences.push(fence.kind);
    byKey.set(key, entry);
  }
  const holders = [...byKey.values()].map(({ holder, fences: named }) => ({
    holder,
    status: ownerStatus(holder.pid, holder.host, holder.processStart),
    fences: named,
  }));

  const digest = digestOf(places, [
    [registry.lockPath, lock?.snapshot, false],
    [registry.formatPath, peek.format, false],
    [registry.rootsPath, peek.roots, false],
    [places.format, service.format?.snapshot, false],
    [places.config, service.config?.snapshot, false],
    [places.hostConfig, service.hostConfig, false],
    [places.registration, service.registration?.snapshot, false],
    [places.ownerLock, service.ownerLock?.snapshot, false],
    [places.capability, service.capability?.snapshot, true],
    [places.checkoutLock, service.checkoutLock?.snapshot, false],
  ]);
  const clear = fences.every(
    (fence) => fence.kind === 'service-format' || fence.kind === 'service-config' || fence.phase === 'stopped',
  );
  const state: RecoveryState = { root: places.root, fences, holders, digest, clear };
  internalsOf.set(state, {
    places,
    service,
    registryLock: lock?.snapshot,
    registryFormat: peek.format,
    roots: peek.roots,
    row: rowEntry !== undefined,
    ownersCheckout,
  });
  return state;
}

/**
 * Releases a dead owner's fences, in release order, inside a registry
 * transaction that takes over a dead holder's lock. It acts only on the
 * snapshots of `state`, only while every holder `state` names is `absent`,
 * and re-asserts before every effect: `beforeEffect()` (the caller's
 * authority and durability), the holders' absence, the registry lock, and
 * every file as the state saw it. A failure stops it where it is, with the
 * remaining fences in place.
 */
export async function releaseDeadOwner(
  files: PrivateFiles,
  registry: Registry,
  places: WorkspacePlaces,
  state: RecoveryState,
  beforeEffect: () => void,
): Promise<void> {
  const internals = internalsOf.get(state);
  if (internals === undefined || internals.places.root !== places.root || internals.places.stateHome !== places.stateHome) {
    throw new ContractError('refused', `${places.root}: not a recovery state read for this workspace`);
  }
  if (state.clear) return;
  const assertAbsent = () => {
    for (const { holder } of state.holders) {
      const status = ownerStatus(holder.pid, holder.host, holder.processStart);
      if (status !== 'absent') {
        throw new ContractError('quarantine', `${places.root}: process ${holder.pid} on ${holder.host} is ${status}`);
      }
    }
  };
  assertAbsent();
  const takeOver = internals.registryLock;
  await registry.transaction(
    (transaction) => new Release(files, registry.rootsPath, registry.formatPath, places, internals, transaction, () => {
      beforeEffect();
      assertAbsent();
    }).run(),
    takeOver === undefined ? {} : { takeOver },
  );
}

/** One run of the release effects, with the files it still expects. */
class Release {
  readonly #files: PrivateFiles;
  readonly #rootsPath: string;
  readonly #formatPath: string;
  readonly #places: WorkspacePlaces;
  readonly #internals: Internals;
  readonly #transaction: RegistryTransaction;
  readonly #guard: () => void;
  readonly #expected: Map<string, [FileSnapshot | undefined, number]>;

  constructor(
    files: PrivateFiles,
    rootsPath: string,
    formatPath: string,
    places: WorkspacePlaces,
    internals: Internals,
    transaction: RegistryTransaction,
    guard: () => void,
  ) {
    this.#files = files;
    this.#rootsPath = rootsPath;
    this.#formatPath = formatPath;
    this.#places = places;
    this.#internals = internals;
    this.#transaction = transaction;
    this.#guard = guard;
    const { service } = internals;
    this.#expected = new Map([
      [places.format, [service.format?.snapshot, PATHS_DOCUMENT_BYTES]],
      [places.config, [service.config?.snapshot, PATHS_DOCUMENT_BYTES]],
      [places.hostConfig, [service.hostConfig, HOST_CONFIG_BYTES]],
      [places.registration, [service.registration?.snapshot, PATHS_DOCUMENT_BYTES]],
      [places.ownerLock, [service.ownerLock?.snapshot, PATHS_DOCUMENT_BYTES]],
      [places.capability, [service.capability?.snapshot, PATHS_DOCUMENT_BYTES]],
      [places.checkoutLock, [service.checkoutLock?.snapshot, PATHS_DOCUMENT_BYTES]],
    ]);
  }

  run(): void {
    this.#checkRegistry();
    const { service, row, ownersCheckout } = this.#internals;
    const registration = service.registration;
    if (registration !== undefined && registration.value.phase !== 'stopped') {
      const stopped = encode({ ...registration.value, phase: 'stopped' });
      this.#effect(() => {
        const written = this.#files.replace(this.#places.registration, registration.snapshot, stopped, PATHS_DOCUMENT_BYTES);
        this.#expected.set(this.#places.registration, [written, PATHS_DOCUMENT_BYTES]);
      });
    }
    if (row) {
      const remaining = this.#transaction.entries.filter((entry) => entry.root !== this.#places.root);
      this.#transaction.encodeEntries(remaining);
      this.#effect(() => this.#transaction.writeEntries(remaining));
    }
    this.#removeIfPresent(this.#places.capability);
    this.#removeIfPresent(this.#places.ownerLock);
    if (ownersCheckout) this.#removeIfPresent(this.#places.checkoutLock);
    // An interrupted registry initialisation was completed when the
    // transaction began (SPEC 4, step 2); the lock goes last, when it ends.
  }

  /** The registry files must still be as the state saw them (the lock was just taken over). */
  #checkRegistry(): void {
    this.#guard();
    const { registryFormat, roots } = this.#internals;
    // A registry read without roots.json (none yet, or format alone) is
    // initialised by the transaction itself, a write (SPEC 4, step 2): then
    // roots.json (and format.json, when there was none) is the one it just
    // created. Any other change since the digest is a conflict.
    const initialisedHere = roots === undefined && this.#transaction.dirty;
    if (!initialisedHere) this.#files.assert(this.#rootsPath, roots, REGISTRY_BYTES);
    if (registryFormat !== undefined || !initialisedHere) this.#files.assert(this.#formatPath, registryFormat, DOCUMENT_BYTES);
    this.#assertExpected();
  }

  #assertExpected(): void {
    for (const [path, [snapshot, maxBytes]] of this.#expected) this.#files.assert(path, snapshot, maxBytes);
  }

  #effect(write: () => void): void {
    this.#guard();
    this.#transaction.assertHeld();
    this.#assertExpected();
    this.#transaction.markDirty();
    write();
  }

  #removeIfPresent(path: string): void {
    const [snapshot, maxBytes] = this.#expected.get(path)!;
    if (snapshot === undefined) return;
    this.#effect(() => {
      this.#files.remove(path, snapshot, maxBytes);
      this.#expected.set(path, [undefined, maxBytes]);
    });
  }
}
