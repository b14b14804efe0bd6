import { randomBytes, randomUUID } from 'node:crypto';
import {
  ContractError,
  DOCUMENT_BYTES,
  PATHS_DOCUMENT_BYTES,
  REGISTRY_ENTRIES,
  decode,
  encode,
  endpoint,
  ownerConfigSchema,
  sha256,
  type OwnerConfig,
  type Phase,
  type Registration,
  type Reservation,
} from '@leasehold/contracts';
import {
  PrivateFiles,
  currentProcess,
  retryingReads,
  type FileSnapshot,
  type PrivateFilesHooks,
} from '@leasehold/private-files';
import { Registry, rootsOverlap, type RegistryPeek, type RegistryTransaction } from '@leasehold/registry';
import { OwnerLease, reservationOf, sameReservation, type OwnedFiles } from './owner-lease.js';
import { NAMESPACE_ENTRIES, defaultStateHome, workspacePlaces, type WorkspacePlaces } from './places.js';
import { readRecoveryState, releaseDeadOwner, type RecoveryState } from './recovery-surface.js';
import {
  HOST_CONFIG_BYTES,
  checkServiceState,
  bounded,
  endpointAdmits,
  readServiceState,
  type ServiceState,
} from './service-state.js';

export interface CoordinationOptions {
  /** Defaults to `defaultStateHome()`. */
  readonly stateHome?: string;
  /** Handed to every PrivateFiles used (tests only). */
  readonly hooks?: PrivateFilesHooks;
  /** Bound of the registry lock wait, in milliseconds (default 2000). */
  readonly lockWaitMs?: number;
}

/**
 * The reason `inspect` gives while any registry transaction runs: a passing
 * state, which a caller may simply ask again about.
 */
export const TRANSACTION_IN_PROGRESS = 'a registry transaction is in progress';

/** Who holds a workspace, as files show it (never the capability). */
export interface OwnerSummary {
  readonly epoch: string;
  readonly endpoint: string;
  readonly pid: number;
  readonly host: string;
  readonly phase: Phase;
}

/** What `inspect` can tell from files alone. */
export type Inspection =
  | { readonly status: 'absent' }
  | { readonly status: 'stopped'; readonly epoch: string | null }
  | { readonly status: 'stopping' | 'quarantined'; readonly owner: OwnerSummary }
  | { readonly status: 'unavailable'; readonly reason: string; readonly owner?: OwnerSummary };

/** What a local client needs to reach the owner. Holds the secret: never print it. */
export interface LocalAccess {
  readonly endpoint: string;
  readonly epoch: string;
  readonly capability: string;
}

/** Handed to `initializeNew` for a workspace that had no service state. */
export interface NewWorkspace {
  readonly root: string;
  /**
   * Publishes `host-config.json`, whose identity must be the config's `policyIdentity`.
   * @throws ContractError `refused` for other bytes (nothing written).
   */
  writeHostConfig(bytes: Uint8Array): void;
}

function summaryOf(registration: Registration): OwnerSummary {
  const { epoch, endpoint: where, pid, host, phase } = registration;
  return { epoch, endpoint: where, pid, host, phase };
}

function reasonOf(error: unknown): string {
  if (ContractError.is(error)) return `${error.code}: ${error.message}`;
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'unknown';
  return `could not read the state (${code})`;
}

/**
 * One workspace's coordination: who owns it, and the only way to become its
 * owner. Pass the root through `resolveWorkspace` first, so that every path
 * to one folder names one workspace.
 */
export class ServiceCoordination {
  readonly root: string;
  readonly stateHome: string;
  readonly places: WorkspacePlaces;
  readonly #files: PrivateFiles;
  readonly #registry: Registry;

  /** @throws ContractError `refused` for a root or state home that is not absolute and normalised. */
  constructor(workspace: string, options: CoordinationOptions = {}) {
    this.stateHome = options.stateHome ?? defaultStateHome();
    this.places = workspacePlaces(workspace, this.stateHome);
    this.root = this.places.root;
    const hooks = options.hooks === undefined ? {} : { hooks: options.hooks };
    this.#files = new PrivateFiles(this.places.namespace, hooks);
    this.#registry = new Registry(this.stateHome, {
      ...hooks,
      ...(options.lockWaitMs === undefined ? {} : { lockWaitMs: options.lockWaitMs }),
    });
  }

  /**
   * What the files say of this workspace. Never throws: anything it cannot
   * prove (a registry transaction in progress, a change while reading, any
   * broken rule) is `unavailable`. A live owner in phase `idle` is
   * `unavailable` too: files alone cannot prove a live, authenticated owner;
   * a client proves that over the transport.
   */
  inspect(): Inspection {
    try {
      return retryingReads(() => this.#inspectOnce());
    } catch (error) {
      return { status: 'unavailable', reason: reasonOf(error) };
    }
  }

  /**
   * Creates the service folder with `format.json` and `config.json`, in one
   * atomic publication. Idempotent for the same config.
   * @throws ContractError `conflict` (another config), `quarantine` (a registry row without service state),
   * `refused` (invalid config or state), `busy`/`quarantine` from the registry lock.
   */
  async initialize(config: OwnerConfig): Promise<void> {
    const configBytes = encode(decode(ownerConfigSchema, config, 'config'));
    await this.#registry.transaction((transaction) => {
      const state = this.#selectedState();
      if (state.service) {
        if (state.config?.snapshot.identity !== sha256(configBytes)) {
          throw new ContractError('conflict', `${this.places.config}: another config exists`);
        }
        return;
      }
      if (transaction.entries.some((entry) => entry.root === this.root)) {
        throw new ContractError('quarantine', `${this.#registry.rootsPath}: a row for this root has no service state`);
      }
      this.#publishServiceFolder(configBytes);
    });
  }

  /**
   * Makes this process the owner. Refusals, first that applies: `boundEndpoint`
   * not concrete or not the config's (`conflict`); a row with an overlapping
   * root or the same endpoint (`conflict`); a full registry (`capacity`); a
   * state that breaks a rule of SPEC 5.2 (`refused`: it is read as a whole
   * before it is judged); a registration that is not stopped (`quarantine`);
   * a held checkout lock or another config (`conflict`). Then, in this
   * order: the reservation, the service folder (new workspaces only, then
   * `initializeNew`), the checkout lock, `owner.lock`, the capability, and the
   * registration in phase `idle`. A failure after the reservation keeps it as
   * a visible fence (the registry lock is retained).
   */
  async acquire(
    config: OwnerConfig,
    boundEndpoint: string = config.endpoint,
    initializeNew?: (workspace: NewWorkspace) => void | Promise<void>,
  ): Promise<OwnerLease> {
    const configBytes = encode(decode(ownerConfigSchema, config, 'config'));
    if (!endpoint.safeParse(boundEndpoint).success || !endpointAdmits(config.endpoint, boundEndpoint)) {
      throw new ContractError('conflict', 'bound endpoint: not concrete, or not the endpoint the config asks for');
    }
    return this.#registry.transaction(async (transaction) => {
      this.#refuseAcquire(transaction, boundEndpoint);
      const state = this.#selectedState();
      if (state.registration !== undefined && state.registration.value.phase !== 'stopped') {
        throw new ContractError('quarantine', `${this.places.registration}: phase ${state.registration.value.phase}, not stopped`);
      }
      if (state.checkoutLock !== undefined) throw new ContractError('conflict', `${this.places.checkoutLock}: held`);
      if (state.config !== undefined && state.config.snapshot.identity !== sha256(configBytes)) {
        throw new ContractError('conflict', `${this.places.config}: another config exists`);
      }
      return this.#acquireWithin(transaction, state, config, configBytes, boundEndpoint, initializeNew);
    });
  }

  /**
   * The workspace's config, or undefined before `initialize`.
   * @throws ContractError `refused` for an invalid state, `conflict` when files kept changing.
   */
  configuration(): OwnerConfig | undefined {
    return retryingReads(() => this.#selectedState().config?.value);
  }

  /**
   * Endpoint, epoch and capability of a registered, not stopped owner whose
   * exact row is in an unlocked registry.
   * @throws ContractError `unavailable` otherwise (the message says why, never the secret).
   */
  localAccess(): LocalAccess {
    try {
      return retryingReads(() => this.#localAccessOnce());
    } catch (error) {
      if (ContractError.is(error, 'unavailable')) throw error;
      throw new ContractError('unavailable', `${this.root}: no local access (${reasonOf(error)})`);
    }
  }

  /**
   * What fences this workspace, for recovery: every fence with the process it
   * names and that process's liveness, and a digest of every file read (the
   * capability by its stamp only). Strictly decoded, but without the
   * cross-file rules, which a crashed owner's files may break. Changes
   * nothing but dead writers' staging leftovers (`sweepStaging: false` keeps
   * even those, and then a dead writer's second link is `refused`).
   * @throws ContractError `refused` (unsafe or malformed file, invalid registry), `conflict` (files kept changing).
   */
  recoveryState(options: { readonly sweepStaging?: boolean } = {}): RecoveryState {
    const sweep = options.sweepStaging ?? true;
    return retryingReads(() => readRecoveryState(this.#files, this.#registry, this.places, sweep));
  }

  /**
   * Releases a dead owner's fences as `state` saw them, in release order,
   * under the registry lock (taking over a dead holder's). Before every effect
   * it calls `beforeEffect()` and re-asserts that every holder is absent, the
   * lock is held and every file is as `state` saw it. This is the only way to
   * write around the selected-state rules, and it can only do what a
   * release would have done for an owner that is provably gone.
   * @throws ContractError `quarantine` (a holder is not absent), `conflict` (a file changed),
   * `refused` (a state of another workspace), and whatever `beforeEffect` throws.
   */
  async releaseDeadOwner(state: RecoveryState, beforeEffect: () => void): Promise<void> {
    await releaseDeadOwner(this.#files, this.#registry, this.places, state, beforeEffect);
  }

  #selectedState(): ServiceState {
    this.#files.entries(this.places.namespace, NAMESPACE_ENTRIES);
    const state = readServiceState(this.#files, this.places);
    checkServiceState(state, this.places);
    return state;
  }

  #inspectOnce(): Inspection {
    const peek = this.#registry.peek();
    if (peek.locked) return { status: 'unavailable', reason: TRANSACTION_IN_PROGRESS };
    const state = this.#selectedState();
    this.#registry.assertUnchanged(peek);
    const row = peek.entries.find((entry) => entry.root === this.root);
    const registration = state.registration?.value;
    if (!state.service) {
      return row === undefined ? { status: 'absent' } : { status: 'unavailable', reason: 'a registry row has no service state' };
    }
    if (registration === undefined || registration.phase === 'stopped') {
      if (row !== undefined) return { status: 'unavailable', reason: 'a registry row outlived its registration' };
      return { status: 'stopped', epoch: registration?.epoch ?? null };
    }
    const owner = summaryOf(registration);
    if (!sameReservation(row, reservationOf(registration))) {
      return { status: 'unavailable', reason: 'the registry row is not the registration', owner };
    }
    if (registration.phase === 'idle') {
      return { status: 'unavailable', reason: 'idle: only the transport can prove a live owner', owner };
    }
    return { status: registration.phase, owner };
  }

  #localAccessOnce(): LocalAccess {
    const peek: RegistryPeek = this.#registry.peek();
    if (peek.locked) throw new ContractError('unavailable', `${this.root}: a registry transaction is in progress`);
    const state = this.#selectedState();
    this.#registry.assertUnchanged(peek);
    const registration = state.registration?.value;
    if (registration === undefined || registration.phase === 'stopped' || state.capability === undefined) {
      throw new ContractError('unavailable', `${this.root}: no registered owner`);
    }
    const row = peek.entries.find((entry) => entry.root === this.root);
    if (!sameReservation(row, reservationOf(registration))) {
      throw new ContractError('unavailable', `${this.root}: the registry row is not the registration`);
    }
    return { endpoint: registration.endpoint, epoch: registration.epoch, capability: state.capability.value.capability };
  }

  #refuseAcquire(transaction: RegistryTransaction, boundEndpoint: string): void {
    const clash = transaction.entries.find((entry) => rootsOverlap(entry.root, this.root) || entry.endpoint === boundEndpoint);
    if (clash !== undefined) {
      const what = rootsOverlap(clash.root, this.root) ? 'an overlapping root' : 'the same endpoint';
      throw new ContractError('conflict', `${this.#registry.rootsPath}: another owner holds ${what}`);
    }
    if (transaction.entries.length >= REGISTRY_ENTRIES) {
      throw new ContractError('capacity', `${this.#registry.rootsPath}: ${REGISTRY_ENTRIES} reservations already`);
    }
  }

  #publishServiceFolder(configBytes: Uint8Array): { format: FileSnapshot; config: FileSnapshot } {
    const formatBytes = bounded(
      encode({ schema: 'leasehold.service-format/1', root: this.root, stateHome: this.stateHome, configIdentity: sha256(configBytes) }),
      PATHS_DOCUMENT_BYTES,
      this.places.format,
    );
    this.#files.directory(this.places.privateRoot, true);
    // format.json and config.json appear together or not at all: a crash
    // here can never leave a half-initialised service folder.
    this.#files.createFolder(this.places.service, { 'format.json': formatBytes, 'config.json': configBytes });
    const format = this.#files.read(this.places.format, PATHS_DOCUMENT_BYTES);
    const config = this.#files.read(this.places.config);
    if (format === undefined || config === undefined) throw new ContractError('conflict', `${this.places.service}: changed while published`);
    return { format, config };
  }

  async #acquireWithin(
    transaction: RegistryTransaction,
    state: ServiceState,
    config: OwnerConfig,
    configBytes: Uint8Array,
    boundEndpoint: string,
    initializeNew: ((workspace: NewWorkspace) => void | Promise<void>) | undefined,
  ): Promise<OwnerLease> {
    const owner = currentProcess();
    const epoch = randomUUID();
    const reservation: Reservation = {
      root: this.root,
      stateHome: this.stateHome,
      configIdentity: sha256(configBytes),
      endpoint: boundEndpoint,
      epoch,
      pid: owner.pid,
      host: owner.host,
      processStart: owner.processStart,
      ownerToken: randomUUID(),
    };
    const registration: Registration = { schema: 'leasehold.registration/1', ...reservation, checkoutToken: randomUUID(), phase: 'idle' };
    // Every document is encoded and bounded before the first write.
    const entries = [...transaction.entries, reservation];
    transaction.encodeEntries(entries);
    const documents = {
      checkoutLock: bounded(
        encode({ schema: 'leasehold.checkout-lock/1', token: registration.checkoutToken, pid: owner.pid, host: owner.host, processStart: owner.processStart }),
        DOCUMENT_BYTES,
        this.places.checkoutLock,
      ),
      ownerLock: bounded(
        encode({ schema: 'leasehold.owner-lock/1', epoch, token: reservation.ownerToken, pid: owner.pid, host: owner.host }),
        DOCUMENT_BYTES,
        this.places.ownerLock,
      ),
      capability: bounded(
        encode({ schema: 'leasehold.local-capability/1', epoch, capability: randomBytes(32).toString('base64url') }),
        DOCUMENT_BYTES,
        this.places.capability,
      ),
      registration: bounded(encode(registration), PATHS_DOCUMENT_BYTES, this.places.registration),
    };

    // The reservation is published before anything else changes: from here
    // on, every crash leaves a row that fences this root until recovery.
    transaction.writeEntries(entries);
    const owned: Partial<OwnedFiles> = {};
    const step = () => {
      transaction.assertHeld();
      for (const key of ['format', 'config', 'hostConfig', 'checkoutLock', 'ownerLock', 'capability'] as const) {
        if (key in owned) this.#files.assert(this.places[key], owned[key], key === 'hostConfig' ? HOST_CONFIG_BYTES : PATHS_DOCUMENT_BYTES);
      }
    };
    if (state.service) {
      owned.format = state.format!.snapshot;
      owned.config = state.config!.snapshot;
      owned.hostConfig = state.hostConfig;
    } else {
      step();
      Object.assign(owned, this.#publishServiceFolder(configBytes), { hostConfig: undefined });
      if (initializeNew !== undefined) {
        await initializeNew(this.#newWorkspace(config, owned, step));
      }
    }
    step();
    owned.checkoutLock = this.#files.create(this.places.checkoutLock, documents.checkoutLock);
    step();
    owned.ownerLock = this.#files.create(this.places.ownerLock, documents.ownerLock);
    step();
    owned.capability = this.#files.create(this.places.capability, documents.capability);
    step();
    const previous = state.registration?.snapshot;
    owned.registration =
      previous === undefined
        ? this.#files.create(this.places.registration, documents.registration, PATHS_DOCUMENT_BYTES)
        : this.#files.replace(this.places.registration, previous, documents.registration, PATHS_DOCUMENT_BYTES);
    return new OwnerLease(this.places, this.#files, this.#registry, registration, owned as OwnedFiles);
  }

  #newWorkspace(config: OwnerConfig, owned: Partial<OwnedFiles>, step: () => void): NewWorkspace {
    return {
      root: this.root,
      writeHostConfig: (bytes) => {
        if (sha256(bytes) !== config.policyIdentity) {
          throw new ContractError('refused', `${this.places.hostConfig}: not the policy the config names`);
        }
        bounded(bytes, HOST_CONFIG_BYTES, this.places.hostConfig);
        step();
        owned.hostConfig = this.#files.create(this.places.hostConfig, bytes, HOST_CONFIG_BYTES);
      },
    };
  }
}
