export { REGISTRY_BYTES, REGISTRY_ENTRIES } from '@leasehold/contracts';
export {
  DEFAULT_LOCK_WAIT_MS,
  NAMESPACE_FOLDER,
  REGISTRY_FOLDER_ENTRIES,
  Registry,
  ensureStateHome,
  type RegistryLockState,
  type RegistryOptions,
  type RegistryPeek,
  type RegistryTransaction,
  type TransactionOptions,
} from './registry.js';
export { rootsOverlap } from './roots-overlap.js';
