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
import { currentProcess, fileOperation, retryingReads, type PublishOptions } from '@leasehold/private-files';
import { admitToTable, refuseState } from './acquire-refusals.js';
import { FileLease } from './file-lease.js';
import { markBytes, publishMark, refuseForeignMarks } from './folder-mark.js';
import { Rollback } from './rollback.js';
import { publishServiceFolder, serviceFolderBytes, unpublishServiceFolder } from './service-folder.js';
import {
  FILE_BYTES,
  SYNCED_BY_LATER_CHANGE,
  assertFiles,
  bounded,
  endpointAdmits,
  sameReservation,
  snapshotsOf,
  type FileSnapshots,
  type ServiceState,
} from './service-state.js';
import type { Workspace } from './workspace.js';
import { selectedState, selectedStateSince, wholeOwnership } from './workspace-reads.js';

// How a process becomes a workspace's owner, in an order that is its crash safety: the row first,
// in a registry transaction, which fences the root; then, outside the lock, each of the owner's
// files after re-asserting the row and every file written so far; a failure rolled back in reverse
// order, ending with the row.

/**
 * Makes this process the owner. Refusals, first that applies: `boundEndpoint`
 * not concrete or not the config's (`conflict`); then, in a registry
 * transaction, a row with an overlapping root or the same endpoint
 * (`conflict`); a full registry (`capacity`); a state that breaks a rule of
 * the selected state (`refused`); a registration that is not stopped
 * (`quarantine`); a held checkout lock or another config (`conflict`).
 *
 * Inside the transaction the reservation is published first, then (for a
 * workspace with no service state) the service folder; from then on the
 * row fences the root, and the rest runs outside the lock: `initializeNew`,
 * the checkout lock, `owner.lock`, the capability, the registration in phase
 * `idle`, each after re-asserting the row and every file written so far.
 * A failure after the reservation rolls back what this call wrote, in
 * reverse order, ending with the row; a rollback step that fails leaves the
 * rest as a visible fence, which `recover` clears once this process exits.
 *
 * With `replaceConfig`, another existing config is no refusal on a stopped
 * workspace (an upgrade): inside the transaction, after every refusal
 * above, the old service folder is unpublished whole, compare-and-swap on
 * every file read, and the workspace is then acquired as a new one
 * (`initializeNew` runs).
 */
export async function acquireWorkspace(
  workspace: Workspace,
  config: OwnerConfig,
  boundEndpoint: string = config.endpoint,
  initializeNew?: (newWorkspace: NewWorkspace) => void | Promise<void>,
  options: { readonly epoch?: string; readonly replaceConfig?: boolean } = {},
): Promise<FileLease> {
  // One operation of private-files: the folders from the state home down are walked once.
  return fileOperation(() => acquireOnce(workspace, config, boundEndpoint, initializeNew, options));
}

async function acquireOnce(
  workspace: Workspace,
  config: OwnerConfig,
  boundEndpoint: string,
  initializeNew: ((newWorkspace: NewWorkspace) => void | Promise<void>) | undefined,
  options: { readonly epoch?: string; readonly replaceConfig?: boolean },
): Promise<FileLease> {
  const { places, files, registry } = workspace;
  const configBytes = encode(decode(ownerConfigSchema, config, 'config'));
  const epoch = options.epoch === undefined ? randomUUID() : decode(id, options.epoch, 'epoch');
  if (!endpoint.safeParse(boundEndpoint).success || !endpointAdmits(config.endpoint, boundEndpoint)) {
    throw new ContractError('conflict', 'bound endpoint: not concrete, or not the endpoint the config asks for');
  }
  registry.checkWorkspace(places.root);
  refuseForeignMarks(workspace);
  const owner = currentProcess();
  // Frozen, so that its canonical text, compared before every step, is made once.
  const reservation: Reservation = Object.freeze({
    root: places.root,
    stateHome: places.stateHome,
    configIdentity: sha256(configBytes),
    endpoint: boundEndpoint,
    epoch,
    pid: owner.pid,
    host: owner.host,
    processStart: owner.processStart,
    ownerToken: randomUUID(),
  });
  const registration: Registration = {
    schema: 'leasehold.registration/1',
    ...reservation,
    checkoutToken: randomUUID(),
    phase: 'idle',
    version: 1,
  };
  const documents = ownerDocuments(workspace, registration);
  const rollback = new Rollback(workspace, reservation);
  const owned: FileSnapshots = {};
  const state = await reserve(
    workspace,
    reservation,
    configBytes,
    config.policyIdentity,
    rollback,
    owned,
    options.replaceConfig === true,
  );
  try {
    const step = () => {
      // Outside the lock: another workspace's transaction may rename roots.json under this read.
      if (!sameReservation(retryingReads(() => registry.rowOf(places.root)).row, reservation)) {
        throw new ContractError('conflict', `${places.roots}: this acquire's row changed`);
      }
      assertFiles(workspace, owned);
    };
    // The folder's own fence, after the row and before any service file (SPEC 5.1a).
    step();
    rollback.mark(documents.mark);
    owned.mark = publishMark(workspace, documents.mark);
    if (!state.service && initializeNew !== undefined) {
      step();
      // The handle works only while initializeNew runs: a late write would change the owner's files under it.
      let open = true;
      const initializing = () => {
        if (!open) throw new ContractError('conflict', `${places.hostConfig}: initializeNew has returned`);
        step();
      };
      try {
        await initializeNew(newWorkspaceOf(workspace, config, owned, initializing));
      } finally {
        open = false;
      }
    }
    owned.checkoutLock = create(workspace, 'checkoutLock', documents.checkoutLock, rollback, step);
    // Fsynced with the service folder by the capability's publication, next (SYNCED_BY_LATER_CHANGE).
    owned.ownerLock = create(workspace, 'ownerLock', documents.ownerLock, rollback, step, SYNCED_BY_LATER_CHANGE);
    owned.capability = create(workspace, 'capability', documents.capability, rollback, step);
    step();
    const previous = state.registration?.snapshot;
    rollback.registration(documents.registration, previous);
    owned.registration =
      previous === undefined
        ? files.create(places.registration, documents.registration, FILE_BYTES.registration)
        : files.replace(places.registration, previous, documents.registration, FILE_BYTES.registration);
  } catch (error) {
    if (await rollback.run()) throw error;
    // The rollback stopped part-way. Where what is left is the whole
    // ownership this call meant to create, the call completes and says so
    // rather than reject and leave an owner that nobody holds.
    const whole = wholeOwnership(workspace, reservation, documents.registration);
    if (whole === undefined) throw error;
    return new FileLease(workspace, registration, whole);
  }
  return new FileLease(workspace, registration, { ...snapshotsOf(state), ...owned });
}

/**
 * The registry transaction of acquire: refusals in order, then the
 * reservation, then the service folder of a new workspace. A failure after
 * the reservation undoes it in the same transaction.
 */
async function reserve(
  workspace: Workspace,
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
  const earlier = stateBeforeLock(workspace);
  return workspace.registry.transaction(workspace.root, (transaction) => {
    admitToTable(workspace, transaction, reservation);
    let state = selectedStateSince(workspace, earlier);
    refuseState(state, configBytes, replaceConfig, workspace.places);
    if (state.config !== undefined && state.config.snapshot.identity !== sha256(configBytes)) {
      unpublishServiceFolder(workspace, state, transaction.writer);
      state = selectedState(workspace);
    }
    rollback.row();
    try {
      transaction.reserve(reservation);
      if (state.service) {
        Object.assign(owned, {
          format: state.format?.snapshot,
          config: state.config?.snapshot,
          hostConfig: state.hostConfig,
        });
      } else {
        rollback.serviceFolder(serviceFolderBytes(workspace, configBytes), policyIdentity);
        Object.assign(owned, publishServiceFolder(workspace, configBytes, transaction.writer));
      }
    } catch (error) {
      rollback.runWithin(transaction);
      throw error;
    }
    return state;
  });
}

/** The selected state, or undefined when it cannot be read whole now (the read under the lock then says why). */
function stateBeforeLock(workspace: Workspace): ServiceState | undefined {
  try {
    return selectedState(workspace);
  } catch {
    return undefined;
  }
}

/** Every document of the owner, encoded and bounded before the first write. */
function ownerDocuments(workspace: Workspace, registration: Registration) {
  const { places } = workspace;
  const { epoch, ownerToken, checkoutToken, pid, host, processStart } = registration;
  return {
    mark: markBytes(workspace, registration),
    checkoutLock: bounded(
      encode({ schema: 'leasehold.checkout-lock/1', token: checkoutToken, pid, host, processStart }),
      FILE_BYTES.checkoutLock,
      places.checkoutLock,
    ),
    ownerLock: bounded(
      encode({ schema: 'leasehold.owner-lock/1', epoch, token: ownerToken, pid, host }),
      FILE_BYTES.ownerLock,
      places.ownerLock,
    ),
    capability: bounded(
      encode({ schema: 'leasehold.local-capability/1', epoch, capability: randomBytes(32).toString('base64url') }),
      FILE_BYTES.capability,
      places.capability,
    ),
    registration: bounded(encode(registration), FILE_BYTES.registration, places.registration),
  };
}

/** One create step of acquire: re-assert, register its undo, publish. */
function create(
  { places, files }: Workspace,
  key: 'checkoutLock' | 'ownerLock' | 'capability' | 'hostConfig',
  bytes: Uint8Array,
  rollback: Rollback,
  step: () => void,
  publish?: PublishOptions,
) {
  step();
  rollback.file(key, bytes);
  return files.create(places[key], bytes, FILE_BYTES[key], publish);
}

function newWorkspaceOf(
  { places, files }: Workspace,
  config: OwnerConfig,
  owned: FileSnapshots,
  step: () => void,
): NewWorkspace {
  return {
    root: places.root,
    writeHostConfig: (bytes) => {
      if (sha256(bytes) !== config.policyIdentity) {
        throw new ContractError('refused', `${places.hostConfig}: not the policy the config names`);
      }
      bounded(bytes, FILE_BYTES.hostConfig, places.hostConfig);
      step();
      owned.hostConfig = files.create(places.hostConfig, bytes, FILE_BYTES.hostConfig);
    },
  };
}
