// Re-exported, so that a caller needs this one package to recognise its errors.
export { ContractError, type ContractErrorCode } from '@leasehold/contracts';
// The seam every backend implements, which `etcdBackend` answers and takes.
export type { Backend, Ownership, OwnershipLease, Recovery } from '@leasehold/contracts';
export { etcdBackend, type EtcdBackend, type EtcdBackendLease, type EtcdBackendOptions } from './backend.js';
export { OWNER_PHASES, RECORD_BYTES, type EtcdRecoveryRecord, type FenceRecord, type OwnerPhase, type OwnerRecord } from './documents.js';
export { DEFAULT_REQUEST_TIMEOUT_MS, type EtcdAuth, type EtcdTls } from './etcd-client.js';
export type { EtcdOwnerLease, FencedOperation, Sequencer } from './etcd-owner-lease.js';
export { EtcdFencingGate, FileFencingGate, type EtcdFencingGateOptions } from './fencing-gate.js';
export { MAX_ROOT_DEPTH, TXN_OPS_BOUND } from './keys.js';
export {
  DEFAULT_TTL_SECONDS,
  EtcdOwnership,
  type AcquireOptions,
  type EtcdInspection,
  type EtcdOwnershipOptions,
  type FenceState,
  type FencedRoot,
  type RecoverySnapshot,
} from './ownership.js';
