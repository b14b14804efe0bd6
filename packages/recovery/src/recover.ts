import { ContractError, hash, recoverRemedy, type AutomaticRecovery, type Backend } from '@leasehold/contracts';
import { defaultStateHome, workspacePlaces, type WorkspacePlaces } from '@leasehold/coordination';
import { PrivateFiles, retryingReads, type PrivateFilesHooks } from '@leasehold/private-files';
import { Registry } from '@leasehold/registry';
import { releaseDeadOwner } from './dead-owner-release.js';
import { Journal, currentOperator } from './journal.js';
import { readRecoveryState, type RecoveryState } from './recovery-state.js';

/** Where and how recovery reads and writes. */
export interface RecoveryOptions {
  /** Defaults to `defaultStateHome()`. */
  readonly stateHome?: string;
  /** Handed to every PrivateFiles recovery uses (tests only). */
  readonly hooks?: PrivateFilesHooks;
  /** Bound of the registry lock wait, in milliseconds (default 2000). */
  readonly lockWaitMs?: number;
  /**
   * The backend this state home is used with (default the file backend), handed to the registry:
   * recovery's transaction on a state home that records another is `refused`, with nothing written.
   */
  readonly backend?: Backend;
  /**
   * `recoverySnapshot` only: remove dead writers' staging leftovers first
   * (default true). Without it a dead writer's second link reads `refused`.
   */
  readonly sweepStaging?: boolean;
}

/** A one-shot permission to release a dead owner's fences, as one snapshot saw them. */
export interface RecoveryGrant {
  /** The snapshot the grant was made for. */
  readonly state: RecoveryState;
  /**
   * Releases the fences in release order; `assertDurable()` runs before every effect.
   * @throws ContractError `consumed-grant` on a second call; `quarantine` (a holder is no longer absent),
   * `conflict` (a file or the row changed), `busy`/`quarantine` from the registry lock, and whatever
   * `assertDurable` or the authority check throws.
   */
  release(assertDurable: () => void): Promise<void>;
}

/** What `recover` did. */
export type RecoveryOutcome =
  | { readonly recovered: false; readonly reason: 'clear' }
  | { readonly recovered: true; readonly record: string };

export interface RecoverOptions extends RecoveryOptions {
  /** The digest of the snapshot the operator reviewed. */
  readonly expectedDigest: string;
  /** Throws to deny; called first and before every effect. */
  readonly assertAuthority: () => void;
  /** For a recovery no person confirmed (see `recoverProvedDead`): its proof, journalled with the record. */
  readonly automatic?: AutomaticRecovery;
}

/** The files, registry and places recovery works with, built from its options. */
interface Tools {
  readonly places: WorkspacePlaces;
  readonly files: PrivateFiles;
  readonly registry: Registry;
}

function toolsOf(workspace: string, options: RecoveryOptions): Tools {
  const places = workspacePlaces(workspace, options.stateHome ?? defaultStateHome());
  const hooks = options.hooks === undefined ? {} : { hooks: options.hooks };
  return {
    places,
    files: new PrivateFiles(places.namespace, hooks),
    registry: new Registry(places.stateHome, {
      ...hooks,
      ...(options.lockWaitMs === undefined ? {} : { lockWaitMs: options.lockWaitMs }),
      ...(options.backend === undefined ? {} : { backend: options.backend }),
    }),
  };
}

function snapshotOf(tools: Tools, sweepStaging: boolean): RecoveryState {
  return retryingReads(() => readRecoveryState(tools.files, tools.registry, tools.places, sweepStaging));
}

/**
 * The fences of the workspace (a root from `resolveWorkspace`), the processes
 * they name with their liveness, and the digest to confirm. Changes nothing
 * but dead writers' staging leftovers.
 * @throws ContractError `refused` (unsafe or malformed file, invalid registry), `conflict` (files kept changing).
 */
export function recoverySnapshot(workspace: string, options: RecoveryOptions = {}): RecoveryState {
  return snapshotOf(toolsOf(workspace, options), options.sweepStaging ?? true);
}

function grantFor(tools: Tools, expectedDigest: string, assertAuthority: () => void): RecoveryGrant {
  if (!hash.safeParse(expectedDigest).success) throw new ContractError('refused', 'digest: not a SHA-256 hex digest');
  assertAuthority();
  const state = snapshotOf(tools, true);
  if (state.digest !== expectedDigest) {
    throw new ContractError('conflict', `${state.root}: the state changed since the digest was taken; review it again`);
  }
  const blocking = state.holders.filter(({ status }) => status !== 'absent');
  if (blocking.length > 0) {
    const named = blocking.map(({ holder, status }) => `process ${holder.pid} on ${holder.host} is ${status}`);
    // One that cannot be told from here is the harder case: its remedy covers a live one too.
    const untold = blocking.some(({ status }) => status === 'ambiguous');
    throw new ContractError('quarantine', `${state.root}: ${named.join('; ')}`, {
      remedy: recoverRemedy(state.root, tools.places.stateHome, untold ? 'ambiguous' : 'live'),
    });
  }
  let used = false;
  return {
    state,
    release: async (assertDurable) => {
      if (used) throw new ContractError('consumed-grant', `${state.root}: this recovery grant was already used`);
      used = true;
      await releaseDeadOwner(tools.files, tools.registry, tools.places, state, () => {
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
  workspace: string,
  expectedDigest: string,
  assertAuthority: () => void,
  options: RecoveryOptions = {},
): RecoveryGrant {
  return grantFor(toolsOf(workspace, options), expectedDigest, assertAuthority);
}

/**
 * Recovers the workspace: grant, journal record, then every effect, each
 * after proving the record is still there unchanged.
 * @throws ContractError as `prepareRecoveryRelease` and `RecoveryGrant.release`.
 */
export async function recover(workspace: string, options: RecoverOptions): Promise<RecoveryOutcome> {
  const tools = toolsOf(workspace, options);
  const grant = grantFor(tools, options.expectedDigest, options.assertAuthority);
  if (grant.state.clear) return { recovered: false, reason: 'clear' };
  const journal = new Journal(tools.places, options.hooks);
  const record = journal.record(grant.state, currentOperator(), options.automatic);
  await grant.release(() => journal.assertDurable(record));
  return { recovered: true, record: record.path };
}
