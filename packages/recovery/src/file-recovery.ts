import { stateHomeLayout, type FencedProcess, type Holder, type Recovery } from '@leasehold/contracts';
import { defaultStateHome } from '@leasehold/coordination';
import { ownerStatus, processDetails, processIdentity } from '@leasehold/private-files';
import { Journal } from './journal.js';
import { recover, recoveryView, type RecoveryOptions } from './recover.js';

/** The process `holder` names, as this host shows it now: by the proofs recovery judges holders by. */
function fencedProcessOf(holder: Holder): FencedProcess {
  const details = processDetails(holder);
  return {
    verdict: ownerStatus(holder.pid, holder.host, holder.processStart),
    commandLine: details?.commandLine ?? null,
    processGroup: details?.processGroup ?? null,
    pidInUse: processIdentity(holder.pid) !== undefined,
  };
}

/**
 * The file backend's recovery behind the seam: `recoveryView` and
 * `recover` of this package, with these options, for any workspace of the
 * state home, and the records of its journal. The digest a snapshot shows is
 * the one `recover` checks.
 */
export function fileRecovery(options: RecoveryOptions = {}): Recovery {
  return {
    fencedProcess: fencedProcessOf,
    async view(root) {
      return recoveryView(root, options);
    },
    async recover(root, request) {
      return recover(root, { ...options, ...request });
    },
    async journal(root) {
      return new Journal(stateHomeLayout(options.stateHome ?? defaultStateHome()), options.hooks).entries(root);
    },
  };
}
