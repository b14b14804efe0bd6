export { Checkout, CheckoutHandle, type CheckoutHolder } from './checkout.js';
export { OwnerLease, reservationOf, sameReservation, type OwnedFiles } from './owner-lease.js';
export {
  PRIVATE_ROOT_ENTRIES,
  SERVICE_ENTRIES,
  defaultStateHome,
  resolveWorkspace,
  workspacePlaces,
  type WorkspacePlaces,
} from './places.js';
export {
  ServiceCoordination,
  type CoordinationOptions,
  type Inspection,
  type LocalAccess,
  type NewWorkspace,
  type OwnerSummary,
} from './service-coordination.js';
export {
  FILE_BYTES,
  SERVICE_FILES,
  SERVICE_SCHEMAS,
  assertFiles,
  readServiceState,
  snapshotsOf,
  type Document,
  type FileSnapshots,
  type ServiceFile,
  type ServiceState,
} from './service-state.js';
