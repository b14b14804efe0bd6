export { type RecoveryFence, type RecoveryHolder, type RecoveryState } from '@leasehold/coordination';
export { Journal, RECOVERY_RECORD_BYTES, currentOperator, type JournalRecord } from './journal.js';
export {
  prepareRecoveryRelease,
  recover,
  recoverySnapshot,
  type RecoverOptions,
  type RecoveryGrant,
  type RecoveryOutcome,
} from './recover.js';
