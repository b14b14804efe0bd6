export { FINDING_KINDS, diagnose, type DiagnoseOptions, type Finding, type FindingKind } from './diagnose.js';
export { type FindingRemedy, type ProcessGone } from './finding-remedy.js';
export { fileRecovery } from './file-recovery.js';
export { Journal, RECOVERY_RECORD_BYTES, currentOperator, type JournalRecord } from './journal.js';
export {
  prepareRecoveryRelease,
  recover,
  recoverySnapshot,
  type RecoverOptions,
  type RecoveryGrant,
  type RecoveryOptions,
  type RecoveryOutcome,
} from './recover.js';
export { type RecoveryFence, type RecoveryHolder, type RecoveryState } from './recovery-state.js';
export { rootExists } from './root-exists.js';
// What a caller of this package needs from the layers below, so that a team installs this one package.
export {
  ContractError,
  type Backend,
  type ContractErrorCode,
  type FenceKind,
  type Holder,
  type Phase,
  type Recovery,
  type RecoveryFenceView,
  type RecoveryHolderView,
  type RecoveryJournalEntry,
  type RecoveryRecord,
  type RecoveryResult,
  type RecoveryView,
} from '@leasehold/contracts';
export { defaultStateHome, resolveWorkspace } from '@leasehold/coordination';
export { type FileSnapshot, type OwnerStatus, type PrivateFilesHooks } from '@leasehold/private-files';
export { stateHomeLayout, type StateHomeLayout } from '@leasehold/registry';
