// What a caller of this package meets in its signatures, from the layers
// below, so that one install is enough.
export {
  ContractError,
  type Backend,
  type CheckoutLock,
  type Companion,
  type ContractErrorCode,
  type Inspection,
  type ListedOwner,
  type LocalAccess,
  type LocalCapability,
  type NewWorkspace,
  type OwnerConfig,
  type OwnerLock,
  type OwnerSummary,
  type Ownership,
  type OwnershipLease,
  type Phase,
  type Registration,
  type Reservation,
  type ServiceFormat,
} from '@leasehold/contracts';
export type {
  FileSnapshot,
  MutationAction,
  MutationOperation,
  MutationStep,
  OwnerStatus,
  PrivateFiles,
  PrivateFilesHooks,
} from '@leasehold/private-files';
export type { Registry } from '@leasehold/registry';
export { acquireWorkspace } from './acquisition.js';
export { Checkout, CheckoutHandle, type CheckoutHolder } from './checkout.js';
export { FileLease } from './file-lease.js';
export { recoveringStateHome } from './folder-mark.js';
export { defaultStateHome, resolveWorkspace } from './places.js';
export { fileOwnership } from './file-ownership.js';
export { releaseInOrder, type HeldFences, type Releaser } from './release.js';
export { initializeWorkspace } from './service-folder.js';
export {
  SERVICE_FILES,
  assertFiles,
  readServiceFile,
  readServiceState,
  snapshotsOf,
  type DecodedFile,
  type Document,
  type FileSnapshots,
  type ServiceFile,
  type ServiceState,
} from './service-state.js';
export { openWorkspace, type CoordinationOptions, type Workspace } from './workspace.js';
export { inspectWorkspace, workspaceConfiguration, workspaceLocalAccess } from './workspace-reads.js';
