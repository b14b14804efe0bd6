import { ContractError, hash } from '@leasehold/contracts';
import type { RecoveryState, ServiceCoordination } from '@leasehold/coordination';
import type { PrivateFilesHooks } from '@leasehold/private-files';
import { Journal, currentOperator } from './journal.js';

/** A one-shot permission to release a dead owner's fences, as one snapshot saw them. */
export interface RecoveryGrant {
  /** The snapshot the grant was made for. */
  readonly state: RecoveryState;
  /**
   * Releases the fences in release order; `assertDurable()` runs before every effect.
   * @throws ContractError `consumed-grant` on a second call; otherwise as `ServiceCoordination.releaseDeadOwner`.
   */
  release(assertDurable: () => void): Promise<void>;
}

/** What `recover` did. */
export type RecoveryOutcome =
  | { readonly recovered: false; readonly reason: 'clear' }
  | { readonly recovered: true; readonly record: string };

export interface RecoverOptions {
  /** The digest of the snapshot the operator reviewed. */
  readonly expectedDigest: string;
  /** Throws to deny; called first and before every effect. */
  readonly assertAuthority: () => void;
  /** Handed to the journal's PrivateFiles (tests only). */
  readonly hooks?: PrivateFilesHooks;
}

/**
 * The fences of the workspace, the processes they name with their liveness,
 * and the digest to confirm. Changes nothing (it sweeps only dead writers'
 * staging leftovers).
 * @throws ContractError `refused` (unsafe or malformed file), `conflict` (files kept changing).
 */
export function recoverySnapshot(coordination: ServiceCoordination): RecoveryState {
  return coordination.recoveryState();
}

/**
 * Checks authority, the digest and that every holder is absent, and returns
 * a one-shot grant.
 * @throws ContractError `refused` (malformed digest), `conflict` (the state changed since the digest),
 * `quarantine` (a holder is live or cannot be told, named in the message), and whatever `assertAuthority` throws.
 */
export function prepareRecoveryRelease(
  coordination: ServiceCoordination,
  expectedDigest: string,
  assertAuthority: () => void,
): RecoveryGrant {
  if (!hash.safeParse(expectedDigest).success) throw new ContractError('refused', 'digest: not a SHA-256 hex digest');
  assertAuthority();
  const state = coordination.recoveryState();
  if (state.digest !== expectedDigest) {
    throw new ContractError('conflict', `${state.root}: the state changed since the digest was taken; review it again`);
  }
  const blocking = state.holders.filter(({ status }) => status !== 'absent');
  if (blocking.length > 0) {
    const named = blocking.map(({ holder, status }) => `process ${holder.pid} on ${holder.host} is ${status}`);
    throw new ContractError('quarantine', `${state.root}: ${named.join('; ')}`);
  }
  let used = false;
  return {
    state,
    release: async (assertDurable) => {
      if (used) throw new ContractError('consumed-grant', `${state.root}: this recovery grant was already used`);
      used = true;
      await coordination.releaseDeadOwner(state, () => {
        assertAuthority();
        assertDurable();
      });
    },
  };
}

/**
 * Recovers the workspace: grant, journal record, then every effect, each
 * after proving the record is still there unchanged.
 * @throws ContractError as `prepareRecoveryRelease` and `RecoveryGrant.release`.
 */
export async function recover(coordination: ServiceCoordination, options: RecoverOptions): Promise<RecoveryOutcome> {
  const grant = prepareRecoveryRelease(coordination, options.expectedDigest, options.assertAuthority);
  if (grant.state.clear) return { recovered: false, reason: 'clear' };
  const journal = new Journal(coordination.places.namespace, options.hooks);
  const record = journal.record(grant.state, currentOperator());
  await grant.release(() => journal.assertDurable(record));
  return { recovered: true, record: record.path };
}
