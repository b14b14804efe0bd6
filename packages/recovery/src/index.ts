export { diagnose, type DiagnoseOptions } from './diagnose.js';
export { FINDING_KINDS, type Finding, type FindingKind } from './findings.js';
export { type FindingRemedy, type ProcessGone } from './finding-remedy.js';
export { fileRecovery } from './file-recovery.js';
export { outlivingProgram, type ViewHolders } from './outliving-program.js';
export { type RecoveryOptions } from './recover.js';
export { rootExists } from './root-exists.js';
// What a caller meets in this package's signatures and errors, and what names a root and a state
// home the way it requires them, so that a team installs this one package.
export {
  ContractError,
  type Backend,
  type ContractErrorCode,
  type Holder,
  type Phase,
  type Recovery,
  type RecoveryFenceView,
  type RecoveryHolderView,
  type RecoveryJournalEntry,
  type RecoveryResult,
  type RecoveryView,
} from '@leasehold/contracts';
export { defaultStateHome, resolveWorkspace } from '@leasehold/coordination';
export { type PrivateFilesHooks } from '@leasehold/private-files';
