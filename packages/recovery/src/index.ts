export { FINDING_KINDS, diagnose, type DiagnoseOptions, type Finding, type FindingKind } from './diagnose.js';
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
