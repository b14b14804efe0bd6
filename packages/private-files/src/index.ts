// Re-exported, so that a caller needs this one package to recognise its errors.
export { ContractError, type ContractErrorCode } from '@leasehold/contracts';
export {
  UnsafeEntryError,
  entryTypeBreach,
  ownershipBreaches,
  type EntryType,
  type UnsafeEntry,
} from './entry-safety.js';
export { errnoOf, isErrno, isSystemError, setupErrnoMeaning, type SystemError } from './errno.js';
export type { PublishOptions } from './file-publication.js';
export { fileSystemOf, type FileSystem } from './file-systems.js';
export { FolderMarks, describeUser, type MarkSnapshot } from './folder-marks.js';
export { sameSnapshot, type FileSnapshot } from './file-reads.js';
export {
  HolderFiles,
  type HeldFile,
  type HolderDocument,
  type HolderFilesOptions,
  type HolderJudgement,
} from './holder-files.js';
export type { MutationAction, MutationOperation, MutationStep, PrivateFilesHooks } from './mutation-steps.js';
export { fileOperation, type FileOperation } from './operation-scope.js';
export { PrivateFiles, type PrivateFilesOptions } from './private-files.js';
export {
  currentProcess,
  describeHolder,
  ownerStatus,
  processDetails,
  processIdentity,
  type OwnerStatus,
  type ProcessDetails,
  type ProcessIdentity,
} from './process-liveness.js';
export { retryingReads } from './retrying-reads.js';
export {
  verifyFileSystem,
  verifyFileSystemWorker,
  type FileSystemVerification,
  type VerifyFileSystemOptions,
} from './verify-fs.js';
// The staging folder's name belongs to the on-disk layout (contracts); every root has one.
export { STAGING_FOLDER } from '@leasehold/contracts';
export { type StagingEntry, type StagingSweep } from './staging-folder.js';
