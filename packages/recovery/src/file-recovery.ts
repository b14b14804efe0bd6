import type { Recovery } from '@leasehold/contracts';
import { defaultStateHome } from '@leasehold/coordination';
import { stateHomeLayout } from '@leasehold/registry';
import { Journal } from './journal.js';
import { recover, recoverySnapshot, type RecoveryOptions } from './recover.js';

/**
 * The file backend's recovery behind the seam: `recoverySnapshot` and
 * `recover` of this package, with these options, for any workspace of the
 * state home, and the records of its journal. The digest a snapshot shows is
 * the one `recover` checks.
 */
export function fileRecovery(options: RecoveryOptions = {}): Recovery {
  return {
    async snapshot(root) {
      return recoverySnapshot(root, options);
    },
    async recover(root, request) {
      return recover(root, { ...options, ...request });
    },
    async journal(root) {
      return new Journal(stateHomeLayout(options.stateHome ?? defaultStateHome()), options.hooks).entries(root);
    },
  };
}
