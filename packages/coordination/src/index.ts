export { Checkout, CheckoutHandle, type CheckoutHolder } from './checkout.js';
export { OwnerLease } from './owner-lease.js';
export {
  NAMESPACE_ENTRIES,
  PRIVATE_ROOT_ENTRIES,
  SERVICE_ENTRIES,
  defaultStateHome,
  resolveWorkspace,
  workspacePlaces,
  type WorkspacePlaces,
} from './places.js';
export { type RecoveryFence, type RecoveryHolder, type RecoveryState } from './recovery-surface.js';
export {
  ServiceCoordination,
  TRANSACTION_IN_PROGRESS,
  type CoordinationOptions,
  type Inspection,
  type LocalAccess,
  type NewWorkspace,
  type OwnerSummary,
} from './service-coordination.js';
