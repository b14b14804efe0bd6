import { ContractError, hash, recoverRemedy, type AutomaticRecovery, type RecoveryResult } from '@leasehold/contracts';
import { openWorkspace, type CoordinationOptions, type Workspace } from '@leasehold/coordination';
import { fileOperation, retryingReads } from '@leasehold/private-files';
import { releaseDeadOwner } from './dead-owner-release.js';
import { Journal, currentOperator } from './journal.js';
import { readRecoveryState, type FileRecoveryView, type RecoveryRead } from './recovery-state.js';

/**
 * Where and how recovery reads and writes: coordination's options (the state home, the registry
 * lock's bound, the backend, whose registry refuses a recovery's transaction on a state home that
 * records another, with nothing written, and the `hooks` of every file it writes), and one more.
 */
export interface RecoveryOptions extends CoordinationOptions {
  /**
   * `recoveryView` only: remove dead writers' staging leftovers first
   * (default true). Without it a dead writer's second link reads `refused`.
   */
  readonly sweepStaging?: boolean;
}

/** A one-shot permission to release a dead owner's fences, as one snapshot saw them. */
export interface RecoveryGrant {
  /** The snapshot the grant was made for. */
  readonly state: FileRecoveryView;
  /**
   * Releases the fences in release order; `assertDurable()` runs before every effect.
   * @throws ContractError `consumed-grant` on a second call; `quarantine` (a holder is no longer absent),
   * `conflict` (a file or the row changed), `busy`/`quarantine` from the registry lock, and whatever
   * `assertDurable` or the authority check throws.
   */
  release(assertDurable: () => void): Promise<void>;
}

export interface RecoverOptions extends RecoveryOptions {
  /** The digest of the snapshot the operator reviewed. */
  readonly expectedDigest: string;
  /** Throws to deny; called first and before every effect. */
  readonly assertAuthority: () => void;
  /** For a recovery no person confirmed (see `recoverProvedDead`): its proof, journalled with the record. */
  readonly automatic?: AutomaticRecovery;
}

function readOf(workspace: Workspace, sweepStaging: boolean): RecoveryRead {
  // One operation of private-files: the folders from the state home down are walked once.
  return fileOperation(() => retryingReads(() => readRecoveryState(workspace, sweepStaging)));
}

/**
 * The fences of the workspace (a root from `resolveWorkspace`), the processes
 * they name with their liveness, and the digest to confirm. Changes nothing
 * but dead writers' staging leftovers.
 * @throws ContractError `refused` (unsafe or malformed file, invalid registry), `conflict` (files kept changing).
 */
export function recoveryView(root: string, options: RecoveryOptions = {}): FileRecoveryView {
  return readOf(openWorkspace(root, options), options.sweepStaging ?? true).view;
}

function grantFor(workspace: Workspace, expectedDigest: string, assertAuthority: () => void): RecoveryGrant {
  if (!hash.safeParse(expectedDigest).success) throw new ContractError('refused', 'digest: not a SHA-256 hex digest');
  assertAuthority();
  const read = readOf(workspace, true);
  const state = read.view;
  if (state.digest !== expectedDigest) {
    throw new ContractError('conflict', `${state.root}: the state changed since the digest was taken; review it again`);
  }
  const blocking = state.holders.filter(({ verdict }) => verdict !== 'absent');
  if (blocking.length > 0) {
    const named = blocking.map(({ holder, verdict }) => `process ${holder.pid} on ${holder.host} is ${verdict}`);
    // One that cannot be told from here is the harder case: its remedy covers a live one too.
    const untold = blocking.some(({ verdict }) => verdict === 'ambiguous');
    throw new ContractError('quarantine', `${state.root}: ${named.join('; ')}`, {
      remedy: recoverRemedy(state.root, workspace.places.stateHome, untold ? 'ambiguous' : 'live'),
    });
  }
  let used = false;
  return {
    state,
    release: async (assertDurable) => {
      if (used) throw new ContractError('consumed-grant', `${state.root}: this recovery grant was already used`);
      used = true;
      // releaseInOrder, inside, is one operation of private-files.
      await releaseDeadOwner(workspace, read, () => {
        assertAuthority();
        assertDurable();
      });
    },
  };
}

/**
 * Checks authority, the digest and that every holder is absent, and returns
 * a one-shot grant.
 * @throws ContractError `refused` (malformed digest), `conflict` (the state changed since the digest),
 * `quarantine` (a holder is live or cannot be told, named in the message), and whatever `assertAuthority` throws.
 */
export function prepareRecoveryRelease(
  root: string,
  expectedDigest: string,
  assertAuthority: () => void,
  options: RecoveryOptions = {},
): RecoveryGrant {
  return grantFor(openWorkspace(root, options), expectedDigest, assertAuthority);
}

/**
 * Recovers the workspace: grant, journal record, then every effect, each
 * after proving the record is still there unchanged.
 * @throws ContractError as `prepareRecoveryRelease` and `RecoveryGrant.release`.
 */
export async function recover(root: string, options: RecoverOptions): Promise<RecoveryResult> {
  // One operation of private-files, from the grant to the last effect: the folders are walked once.
  return fileOperation(() => recoverOnce(root, options));
}

async function recoverOnce(root: string, options: RecoverOptions): Promise<RecoveryResult> {
  const workspace = openWorkspace(root, options);
  const grant = grantFor(workspace, options.expectedDigest, options.assertAuthority);
  if (grant.state.clear) return { recovered: false, reason: 'clear' };
  const journal = new Journal(workspace.places, options.hooks);
  const record = journal.record(grant.state, currentOperator(), options.automatic);
  await grant.release(() => journal.assertDurable(record));
  return { recovered: true, record: record.path };
}
