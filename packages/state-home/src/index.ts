export { openStateHome, type OpenBackend, type OpenOptions } from './open-state-home.js';
export { recordBackend } from './record-backend.js';
export { StateHomeError, type StateHomeRemedy } from './state-home-error.js';
// What a caller meets in the signatures above, from the layers below, so that one install is enough.
export {
  ContractError,
  type Backend,
  type ContractErrorCode,
  type Ownership,
  type Recovery,
} from '@leasehold/contracts';
export { defaultStateHome, resolveWorkspace } from '@leasehold/coordination';
// What a layer above the seam needs of the layers below that is no backend's knowledge: narrowing a
// system error, a holder in words, the file system a state home is on and its verifier, whether two
// workspace roots overlap (one is the other or inside it).
export {
  describeHolder,
  errnoOf,
  fileSystemOf,
  isErrno,
  isSystemError,
  verifyFileSystem,
  verifyFileSystemWorker,
  type FileSystem,
  type FileSystemVerification,
  type SystemError,
  type VerifyFileSystemOptions,
} from '@leasehold/private-files';
export {
  allowanceOf,
  rootsOverlap,
  stateHomeFileSystem,
  type FileSystemAllowance,
  type FileSystemJudgement,
} from '@leasehold/registry';
