import {
  PRIVATE_ROOT_NAME,
  decodeBytes,
  privateRootPlaces,
  serviceFormatSchema,
  stateHomeLayout,
  workspacePlaces,
  type Backend,
  type Inspection,
  type ListedOwner,
  type Ownership,
  type OwnershipLease,
  type WatchSource,
  acquireInTurn,
  watchInspections,
} from '@leasehold/contracts';
import { PrivateFiles, fileOperation, ownerStatus, retryingReads } from '@leasehold/private-files';
import type { Registry } from '@leasehold/registry';
import { acquireWorkspace } from './acquisition.js';
import type { FileLease } from './file-lease.js';
import { defaultStateHome } from './places.js';
import { initializeWorkspace } from './service-folder.js';
import { FILE_BYTES } from './service-state.js';
import { folderWakeups } from './folder-wakeups.js';
import { fileWaitingLine } from './wait.js';
import { WaitLine } from './wait-line.js';
import { stateHomeWorkspaces, type CoordinationOptions } from './workspace.js';
import {
  inspectWorkspace,
  reasonOf,
  summaryOf,
  workspaceConfiguration,
  workspaceLocalAccess,
} from './workspace-reads.js';

/** The files' `FileLease` behind the seam: the same proofs, as the seam's async calls. */
function leaseOver(lease: FileLease, root: string): OwnershipLease {
  return {
    root,
    // A getter: the phase is the one this owner last wrote, not the one at acquire.
    get owner() {
      return summaryOf(lease.registration);
    },
    assert: async () => lease.assert(),
    phase: async (phase) => lease.phase(phase),
    release: () => lease.release(),
    watch: (intervalMs, onLost) => lease.watch(intervalMs, onLost),
    localAccess: () => lease.localAccess(),
    fenceProcess: async (pid) => lease.fenceProcess(pid),
  };
}

/** Every row of the table, with whether the process it names is still there. */
function listed(registry: Registry): ListedOwner[] {
  const { entries } = retryingReads(() => registry.list());
  return entries.map(({ root, endpoint, epoch, pid, host, processStart }) => ({
    root,
    endpoint,
    epoch,
    pid,
    host,
    verdict: ownerStatus(pid, host, processStart),
  }));
}

/**
 * Every root whose service folder the state home keeps (its format document names it), sorted:
 * stopped workspaces too. A private root a crash left without its format names no workspace yet.
 */
function knownRoots(stateHome: string): string[] {
  const layout = stateHomeLayout(stateHome);
  const files = new PrivateFiles(layout.namespace);
  const roots = files.entries(layout.workspaces, [PRIVATE_ROOT_NAME]).flatMap((name) => {
    const path = privateRootPlaces(stateHome, name).format;
    const snapshot = files.read(path, FILE_BYTES.format);
    return snapshot === undefined
      ? []
      : [decodeBytes(serviceFormatSchema, snapshot.bytes, FILE_BYTES.format, path).root];
  });
  return roots.sort();
}

/**
 * The file backend behind the seam: the ownership of the workspaces of one
 * state home, kept in this host's private files. Each call opens the
 * `Workspace` of its root (which checks the root) over the state home's one
 * registry and private files, so one `Ownership` serves every workspace of
 * the state home.
 * @throws ContractError `refused` for a state home (given, or the environment's) that is not absolute and normalised.
 */
export function fileOwnership(options: CoordinationOptions = {}): Ownership {
  const stateHome = options.stateHome ?? defaultStateHome();
  const backend: Backend = options.backend ?? { kind: 'files' };
  // Made once: it checks the state home now; every call opens its root over it, and `list` reads through it.
  const { registry, open } = stateHomeWorkspaces({ ...options, stateHome });
  const ownership: Ownership = {
    stateHome,
    backend,
    async inspect(root): Promise<Inspection> {
      let workspace;
      try {
        workspace = open(root);
      } catch (error) {
        // Only opening throws: a root that is not absolute and normalised.
        return { status: 'unavailable', reason: reasonOf(error) };
      }
      return inspectWorkspace(workspace);
    },
    async initialize(root, config) {
      await initializeWorkspace(open(root), config);
    },
    async acquire(root, config, request = {}) {
      const workspace = open(root);
      const choices = {
        ...(request.epoch === undefined ? {} : { epoch: request.epoch }),
        ...(request.replaceConfig === undefined ? {} : { replaceConfig: request.replaceConfig }),
      };
      const attempt = async () =>
        leaseOver(
          await acquireWorkspace(workspace, config, request.boundEndpoint, request.initializeNew, choices),
          workspace.root,
        );
      const { waitMs = 0, signal, onWait } = request;
      return waitMs > 0 ? acquireInTurn(fileWaitingLine(workspace), attempt, { waitMs, signal, onWait }) : attempt();
    },
    async waiters(root) {
      return new WaitLine(root, stateHome).count();
    },
    async configuration(root) {
      return workspaceConfiguration(open(root));
    },
    async localAccess(root) {
      return workspaceLocalAccess(open(root));
    },
    capabilityFile(root) {
      return workspacePlaces(root, stateHome).capability;
    },
    async list() {
      return listed(registry);
    },
    async workspaces() {
      return fileOperation(() => retryingReads(() => knownRoots(stateHome)));
    },
    watch(root, watchOptions) {
      let wakeups: WatchSource = () => () => {};
      try {
        wakeups = folderWakeups(open(root).places);
      } catch {
        // A root that is not absolute and normalised: every read answers `unavailable`, saying so.
      }
      return watchInspections(() => ownership.inspect(root), wakeups, watchOptions);
    },
    // Files hold no connection: a lease still held stays held until this process releases it or exits.
    async close() {},
  };
  return ownership;
}
