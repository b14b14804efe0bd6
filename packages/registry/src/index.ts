// What a caller of this package meets in its signatures, from the layers
// below, so that one install is enough.
export {
  ContractError,
  REGISTRY_BYTES,
  REGISTRY_ENTRIES,
  type Backend,
  type ContractErrorCode,
  type FileSystemAllowance,
  type RegistryLock,
  type Reservation,
} from '@leasehold/contracts';
// Also what a reader of the table needs: a row's holder's liveness, a read
// retried when a writer raced it, and this process's identity for its own row;
// and the snapshots and publication options a transaction's writer takes.
export {
  currentProcess,
  ownerStatus,
  retryingReads,
  type FileSnapshot,
  type MutationAction,
  type MutationOperation,
  type MutationStep,
  type OwnerStatus,
  type PrivateFilesHooks,
  type ProcessIdentity,
  type PublishOptions,
} from '@leasehold/private-files';
export type { GuardedWriter } from './guarded-writer.js';
export { DEFAULT_LOCK_WAIT_MS, type RegistryLockState } from './registry-lock.js';
export { Registry, type RegistryOptions, type RegistryView, type RowRead } from './registry.js';
export { rootsOverlap } from './roots-overlap.js';
export { allowanceOf, type FileSystemJudgement } from './file-system-check.js';
export { backendOf, ensureStateHome, stateHomeFileSystem } from './state-home-setup.js';
export type { RegistryTransaction } from './transaction.js';
