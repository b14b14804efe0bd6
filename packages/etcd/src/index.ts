// Re-exported, so that a caller needs this one package to recognise its errors.
export { ContractError, type ContractErrorCode } from '@leasehold/contracts';
// The seam every backend implements, which `etcdBackend` answers and takes.
export type { Backend, Ownership, OwnershipLease, Recovery } from '@leasehold/contracts';
export { etcdBackend, type EtcdBackend, type EtcdBackendLease } from './backend.js';
export type { EtcdBackendOptions } from './backend-options.js';
export { DEFAULT_REQUEST_TIMEOUT_MS, type EtcdAuth, type EtcdTls } from './etcd-client.js';
// The fencing token of an `EtcdBackendLease`, and the gates a daemon's downstream store checks it with.
export type { FencedOperation, Sequencer } from './etcd-fence.js';
export { EtcdFencingGate, FileFencingGate, type EtcdFencingGateOptions } from './fencing-gate.js';
export { DEFAULT_TTL_SECONDS } from './ownership.js';
