import { posix } from 'node:path';
import {
  createFolderSteps,
  createSteps,
  listingOutsideStaging,
  lockCreateSteps,
  lockRemoveSteps,
  markCreateSteps,
  markRemoveSteps,
  ownerFilesSteps,
  releaseServiceSteps,
  removeSteps,
  replaceSteps,
} from '@leasehold/test-utils';

// ---- The expected step lists, written from docs/persistence.md ("Publishing a file": how private-files
// publishes) and docs/ownership.md ("The registry transaction"; the order of "Acquire", phase and "Release"). ----
// Paths are shown relative to the test folder: `state` is the state home, `<ws>` the workspace's private root,
// `<temp>` a staged file and `<folder>` a staged folder (see `shownStep`).

const STAGING = 'state/v1/.staging';
export const REGISTRY = 'state/v1/registry';
const WORKSPACE = 'state/v1/workspaces/<ws>';
const SERVICE = `${WORKSPACE}/service`;
/** The workspace folder itself, where its own mark lives (`.leasehold/`). */
const FOLDER = 'workspaces/workspace';

const parentOf = (path: string) => (path === 'state' ? '<base>' : posix.dirname(path));
const madeFolder = (operation: string, path: string) => [
  `${operation} mkdir ${path}`,
  `${operation} fsync-directory ${parentOf(path)}`,
];

/** A state home used for the first time: the state home, the namespace and the registry folder, then the staging folder. */
const STATE_HOME_MADE = [
  ...madeFolder('directory', 'state'),
  ...madeFolder('directory', 'state/v1'),
  ...madeFolder('directory', REGISTRY),
  ...madeFolder('create', STAGING),
];

/** The service folder of a new workspace, published whole (format.json and config.json together). */
const SERVICE_FOLDER_PUBLISHED = [
  ...madeFolder('directory', 'state/v1/workspaces'),
  ...madeFolder('directory', WORKSPACE),
  ...createFolderSteps(SERVICE, ['format.json', 'config.json']),
];

/**
 * The one registry transaction of acquire for a workspace with no service state, in a registry
 * not yet initialised (docs/ownership.md, "The registry transaction", step 2): the lock, the table's initialisation, the row first,
 * the service folder, the lock removed. Nothing else runs under the lock.
 */
const RESERVATION_OF_NEW_WORKSPACE = [
  ...lockCreateSteps(`${REGISTRY}/registry.lock`),
  ...createSteps(`${REGISTRY}/format.json`),
  ...createSteps(`${REGISTRY}/roots.json`),
  ...replaceSteps(`${REGISTRY}/roots.json`),
  ...SERVICE_FOLDER_PUBLISHED,
  ...lockRemoveSteps(`${REGISTRY}/registry.lock`),
];

/** Outside the lock, in acquire's order (docs/ownership.md, "Acquire"): the checkout lock, owner.lock, the capability (one folder fsync for the last two). */
const OWNER_FILES_CREATED = ownerFilesSteps(WORKSPACE);

/** The folder's own mark, after the row and before any service file, in a folder that never had one (its dot-folder made). */
const MARK_IN_NEW_FOLDER = markCreateSteps(FOLDER, { newFolder: true });

/** Acquire of a fresh workspace in a fresh state home. */
export const ACQUIRE_FRESH_STEPS: readonly string[] = [
  ...STATE_HOME_MADE,
  ...RESERVATION_OF_NEW_WORKSPACE,
  ...MARK_IN_NEW_FOLDER,
  ...OWNER_FILES_CREATED,
  ...createSteps(`${SERVICE}/registration.json`),
];

/** As `ACQUIRE_FRESH_STEPS`, with an `initializeNew` that writes host-config.json (first, outside the lock). */
export const ACQUIRE_FRESH_WITH_HOST_CONFIG_STEPS: readonly string[] = [
  ...STATE_HOME_MADE,
  ...RESERVATION_OF_NEW_WORKSPACE,
  ...MARK_IN_NEW_FOLDER,
  ...createSteps(`${SERVICE}/host-config.json`),
  ...OWNER_FILES_CREATED,
  ...createSteps(`${SERVICE}/registration.json`),
];

/** Acquire of a fresh workspace after a writer died with a staged temp: the transaction sweeps it first. */
export const ACQUIRE_AFTER_STAGED_TEMP_STEPS: readonly string[] = [
  `sweep-staging unlink ${STAGING}/<temp>`,
  `sweep-staging fsync-directory ${STAGING}`,
  ...RESERVATION_OF_NEW_WORKSPACE,
  ...MARK_IN_NEW_FOLDER,
  ...OWNER_FILES_CREATED,
  ...createSteps(`${SERVICE}/registration.json`),
];

/** Acquire over a stopped registration: the row alone under the lock; the registration replaced last. */
export const ACQUIRE_OVER_STOPPED_STEPS: readonly string[] = [
  ...lockCreateSteps(`${REGISTRY}/registry.lock`),
  ...replaceSteps(`${REGISTRY}/roots.json`),
  ...lockRemoveSteps(`${REGISTRY}/registry.lock`),
  ...markCreateSteps(FOLDER),
  ...OWNER_FILES_CREATED,
  ...replaceSteps(`${SERVICE}/registration.json`),
];

/** `lease.phase('stopping')`: one compare-and-swap of the registration. */
export const PHASE_STEPS: readonly string[] = replaceSteps(`${SERVICE}/registration.json`);

/** `lease.release()`: registration stopped, capability, owner.lock (one folder fsync for the three); the folder's mark; then one transaction: the row, the checkout lock last. */
export const RELEASE_STEPS: readonly string[] = [
  ...releaseServiceSteps(SERVICE),
  ...markRemoveSteps(FOLDER),
  ...lockCreateSteps(`${REGISTRY}/registry.lock`),
  ...replaceSteps(`${REGISTRY}/roots.json`),
  ...removeSteps(`${WORKSPACE}/checkout.lock`),
  ...lockRemoveSteps(`${REGISTRY}/registry.lock`),
];

// ---- Steps whose I/O error the operation absorbs, so that it resolves (docs/ownership.md, "The registry transaction", step 5; "Phase changes and the self-fence"; "Release"). ----

/** A failed removal of the registry lock never fails the transaction: its work stands. */
export const LOCK_REMOVAL_STEPS: readonly string[] = lockRemoveSteps(`${REGISTRY}/registry.lock`);

/** Phase: the rename went through, only the folder fsync failed: the write counts as done. */
export const PHASE_ABSORBED: readonly string[] = [`replace fsync-directory ${SERVICE}`];

/** Release: every write or removal whose effect happened but whose folder fsync failed counts as done, and the lock removal. */
export const RELEASE_ABSORBED: readonly string[] = [
  `remove fsync-directory ${SERVICE}`,
  `remove fsync-directory ${FOLDER}/.leasehold`,
  `replace fsync-directory ${REGISTRY}`,
  `remove fsync-directory ${WORKSPACE}`,
  ...LOCK_REMOVAL_STEPS,
];

/** The errno an injected failure of `step` carries: ENOSPC for what takes space (a write, a mkdir), else EIO. */
export function ioErrorCodeOf(step: string): 'EIO' | 'ENOSPC' {
  const action = step.split(' ')[1];
  return action === 'write' || action === 'mkdir' ? 'ENOSPC' : 'EIO';
}

/** An error as a failing system call throws it. */
export function injectedError(code: string, step: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: injected before ${step}`), { code });
}

/** Every entry below the state home outside staging, as `folder` or the file's bytes (hex): what is there, not which inode. */
export function contentListing(stateHome: string): Record<string, string> {
  return Object.fromEntries(
    Object.entries(listingOutsideStaging(stateHome)).map(([path, entry]) => [
      path,
      entry.kind === 'folder' ? 'folder' : entry.bytes,
    ]),
  );
}
