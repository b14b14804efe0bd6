export { REGISTRY_BYTES, REGISTRY_ENTRIES } from '@leasehold/contracts';
export {
  NAMESPACE_ENTRIES,
  NAMESPACE_FOLDER,
  REGISTRY_FOLDER_ENTRIES,
  TAKEOVER_MARKER,
  stateHomeLayout,
  takeoverMarker,
  type StateHomeLayout,
} from './layout.js';
export {
  DEFAULT_LOCK_WAIT_MS,
  Registry,
  ensureStateHome,
  type RegistryLockState,
  type RegistryOptions,
  type RegistryTransaction,
  type RegistryView,
  type RowRead,
} from './registry.js';
export { rootsOverlap } from './roots-overlap.js';
