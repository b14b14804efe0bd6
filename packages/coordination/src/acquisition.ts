import { randomBytes, randomUUID } from 'node:crypto';
import {
  ContractError,
  decode,
  encode,
  endpoint,
  id,
  ownerConfigSchema,
  sha256,
  type NewWorkspace,
  type OwnerConfig,
  type Registration,
  type Reservation,
} from '@leasehold/contracts';
import { currentProcess, retryingReads, type PrivateFiles, type PublishOptions } from '@leasehold/private-files';
import type { Registry } from '@leasehold/registry';
import { admitToTable, refuseState } from './acquire-refusals.js';
import { OwnerLease, sameReservation } from './owner-lease.js';
import type { WorkspacePlaces } from './places.js';
import { Rollback } from './rollback.js';
import type { ServiceFolder } from './service-folder.js';
import {
  FILE_BYTES,
  SYNCED_BY_LATER_CHANGE,
  assertFiles,
  bounded,
  endpointAdmits,
  snapshotsOf,
  type FileSnapshots,
  type ServiceState,
} from './service-state.js';
import type { WorkspaceReads } from './workspace-reads.js';

/**
 * How a process becomes a workspace's owner, in an order that is its crash
 * safety: the row first, in a registry transaction, which fences the root;
 * then, outside the lock, each of the owner's files after re-asserting the
 * row and every file written so far; a failure rolled back in reverse order,
 * ending with the row.
 */
export class Acquisition {
  readonly #places: WorkspacePlaces;
  readonly #files: PrivateFiles;
  readonly #registry: Registry;
  readonly #reads: WorkspaceReads;
  readonly #serviceFolder: ServiceFolder;

  constructor(places: WorkspacePlaces, files: PrivateFiles, registry: Registry, reads: WorkspaceReads, serviceFolder: ServiceFolder) {
    this.#places = places;
    this.#files = files;
    this.#registry = registry;
    this.#reads = reads;
    this.#serviceFolder = serviceFolder;
  }

  /** Makes this process the owner; see `ServiceCoordination.acquire`. */
  async acquire(
    config: OwnerConfig,
    boundEndpoint: string,
    initializeNew: ((workspace: NewWorkspace) => void | Promise<void>) | undefined,
    options: { readonly epoch?: string; readonly replaceConfig?: boolean },
  ): Promise<OwnerLease> {
    const configBytes = encode(decode(ownerConfigSchema, config, 'config'));
    const epoch = options.epoch === undefined ? randomUUID() : decode(id, options.epoch, 'epoch');
    if (!endpoint.safeParse(boundEndpoint).success || !endpointAdmits(config.endpoint, boundEndpoint)) {
      throw new ContractError('conflict', 'bound endpoint: not concrete, or not the endpoint the config asks for');
    }
    const owner = currentProcess();
    // Frozen, so that its canonical text, compared before every step, is made once.
    const reservation: Reservation = Object.freeze({
      root: this.#places.root,
      stateHome: this.#places.stateHome,
      configIdentity: sha256(configBytes),
      endpoint: boundEndpoint,
      epoch,
      pid: owner.pid,
      host: owner.host,
      processStart: owner.processStart,
      ownerToken: randomUUID(),
    });
    const registration: Registration = { schema: 'leasehold.registration/1', ...reservation, checkoutToken: randomUUID(), phase: 'idle' };
    const documents = this.#ownerDocuments(registration);
    const rollback = new Rollback(this.#files, this.#registry, this.#places, reservation);
    const owned: FileSnapshots = {};
    const state = await this.#reserve(reservation, configBytes, config.policyIdentity, rollback, owned, options.replaceConfig === true);
    try {
      const step = () => {
        // Outside the lock: another workspace's transaction may rename roots.json under this read.
        if (!sameReservation(retryingReads(() => this.#registry.rowOf(this.#places.root)).row, reservation)) {
          throw new ContractError('conflict', `${this.#places.roots}: this acquire's row changed`);
        }
        assertFiles(this.#files, this.#places, owned);
      };
      if (!state.service && initializeNew !== undefined) {
        step();
        // The handle works only while initializeNew runs: a late write would change the owner's files under it.
        let open = true;
        const initializing = () => {
          if (!open) throw new ContractError('conflict', `${this.#places.hostConfig}: initializeNew has returned`);
          step();
        };
        try {
          await initializeNew(this.#newWorkspace(config, owned, initializing));
        } finally {
          open = false;
        }
      }
      owned.checkoutLock = this.#create('checkoutLock', documents.checkoutLock, rollback, step);
      // Fsynced with the service folder by the capability's publication, next (SYNCED_BY_LATER_CHANGE).
      owned.ownerLock = this.#create('ownerLock', documents.ownerLock, rollback, step, SYNCED_BY_LATER_CHANGE);
      owned.capability = this.#create('capability', documents.capability, rollback, step);
      step();
      const previous = state.registration?.snapshot;
      rollback.registration(documents.registration, previous);
      owned.registration =
        previous === undefined
          ? this.#files.create(this.#places.registration, documents.registration, FILE_BYTES.registration)
          : this.#files.replace(this.#places.registration, previous, documents.registration, FILE_BYTES.registration);
    } catch (error) {
      if (await rollback.run()) throw error;
      // The rollback stopped part-way. Where what is left is the whole
      // ownership this call meant to create, the call completes and says so
      // rather than reject and leave an owner that nobody holds.
      const whole = this.#reads.wholeOwnership(reservation, documents.registration);
      if (whole === undefined) throw error;
      return new OwnerLease(this.#places, this.#files, this.#registry, registration, whole);
    }
    return new OwnerLease(this.#places, this.#files, this.#registry, registration, { ...snapshotsOf(state), ...owned } as Required<FileSnapshots>);
  }

  /**
   * The registry transaction of acquire: refusals in order, then the
   * reservation, then the service folder of a new workspace. A failure after
   * the reservation undoes it in the same transaction.
   */
  async #reserve(
    reservation: Reservation,
    configBytes: Uint8Array,
    policyIdentity: string,
    rollback: Rollback,
    owned: FileSnapshots,
    replaceConfig: boolean,
  ): Promise<ServiceState> {
    // The workspace's state is read, decoded and checked before the lock, which then holds only the
    // proof that no file moved since. A state that cannot be read now is read under the lock, after
    // the table's refusals, as it always was.
    const earlier = this.#stateBeforeLock();
    return this.#registry.transaction(this.#places.root, (transaction) => {
      admitToTable(transaction, reservation, this.#files, this.#places);
      let state = this.#reads.selectedStateSince(earlier);
      refuseState(state, configBytes, replaceConfig, this.#places);
      if (state.config !== undefined && state.config.snapshot.identity !== sha256(configBytes)) {
        this.#serviceFolder.unpublish(state, transaction.writer);
        state = this.#reads.selectedState();
      }
      rollback.row();
      try {
        transaction.reserve(reservation);
        if (state.service) {
          Object.assign(owned, { format: state.format?.snapshot, config: state.config?.snapshot, hostConfig: state.hostConfig });
        } else {
          rollback.serviceFolder(this.#serviceFolder.bytes(configBytes), policyIdentity);
          Object.assign(owned, this.#serviceFolder.publish(configBytes, transaction.writer));
        }
      } catch (error) {
        rollback.runWithin(transaction);
        throw error;
      }
      return state;
    });
  }

  /** The selected state, or undefined when it cannot be read whole now (the read under the lock then says why). */
  #stateBeforeLock(): ServiceState | undefined {
    try {
      return this.#reads.selectedState();
    } catch {
      return undefined;
    }
  }

  /** Every document of the owner, encoded and bounded before the first write. */
  #ownerDocuments(registration: Registration) {
    const { epoch, ownerToken, checkoutToken, pid, host, processStart } = registration;
    return {
      checkoutLock: bounded(
        encode({ schema: 'leasehold.checkout-lock/1', token: checkoutToken, pid, host, processStart }),
        FILE_BYTES.checkoutLock,
        this.#places.checkoutLock,
      ),
      ownerLock: bounded(encode({ schema: 'leasehold.owner-lock/1', epoch, token: ownerToken, pid, host }), FILE_BYTES.ownerLock, this.#places.ownerLock),
      capability: bounded(
        encode({ schema: 'leasehold.local-capability/1', epoch, capability: randomBytes(32).toString('base64url') }),
        FILE_BYTES.capability,
        this.#places.capability,
      ),
      registration: bounded(encode(registration), FILE_BYTES.registration, this.#places.registration),
    };
  }

  /** One create step of acquire: re-assert, register its undo, publish. */
  #create(
    key: 'checkoutLock' | 'ownerLock' | 'capability' | 'hostConfig',
    bytes: Uint8Array,
    rollback: Rollback,
    step: () => void,
    publish?: PublishOptions,
  ) {
    step();
    rollback.file(key, bytes);
    return this.#files.create(this.#places[key], bytes, FILE_BYTES[key], publish);
  }

  #newWorkspace(config: OwnerConfig, owned: FileSnapshots, step: () => void): NewWorkspace {
    return {
      root: this.#places.root,
      writeHostConfig: (bytes) => {
        if (sha256(bytes) !== config.policyIdentity) {
          throw new ContractError('refused', `${this.#places.hostConfig}: not the policy the config names`);
        }
        bounded(bytes, FILE_BYTES.hostConfig, this.#places.hostConfig);
        step();
        owned.hostConfig = this.#files.create(this.#places.hostConfig, bytes, FILE_BYTES.hostConfig);
      },
    };
  }
}
