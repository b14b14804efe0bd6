// The checks on one state a power loss may leave, with the real library (docs/persistence.md,
// "Crash safety"): the state is written to disk, then recovered and acquired for real, and
// every invariant it breaks is answered rather than thrown.
import { acquireWorkspace, inspectWorkspace, openWorkspace } from '@leasehold/coordination';
import { Registry } from '@leasehold/registry';
import { codeOfAsync, materialise, serviceFences, type Tree } from '@leasehold/test-utils';
import { recover, recoveryView } from '../src/recover.js';
import type { FileRecoveryView } from '../src/recovery-state.js';
import { OWNER_CONFIG, PARENT_ENDPOINT } from './helpers.js';
import type { Case } from './power-loss.js';
import { clashingRows, effectWithoutRecord, fencesIn } from './power-loss-tree-reads.js';

/** What one state showed: each root's `inspect` before recovery and what recovery did, and every invariant it broke. */
export interface Checked {
  readonly inspected: readonly string[];
  readonly recovery: readonly string[];
  /** Each fenced root's new acquire: how it was refused (its error code). */
  readonly acquired: readonly string[];
  readonly broken: readonly string[];
}

/** The message of a thrown error, with its code when it is a ContractError. */
function failureOf(error: unknown): string {
  if (error instanceof Error) return 'code' in error ? `${String(error.code)}: ${error.message}` : error.message;
  return String(error);
}

/**
 * Crash safety (docs/persistence.md, "Crash safety") on one state, written
 * at its own root, for each root: no two rows clash; inside a recovery (`recoveryOf`, the state it started from),
 * no effect is on disk without its journal record; `inspect`, before
 * anything else, is not `absent` or `stopped` while a fence remains; a
 * registry transaction of a workspace no protocol touches succeeds (the
 * next writer of any workspace takes over a lock the crash left), and
 * everything below is checked after it; a new acquire by this process (not
 * the dead holder) is refused while a fence remains; the snapshot answers
 * (it may sweep dead writers' staging leftovers; no refusal is allowed);
 * `recover` with its digest leaves the root fence-free, `absent` or
 * `stopped`; then (only once every root recovered, since a failure leaves
 * its files behind) a fresh owner acquires and releases. Answers what broke
 * rather than throwing, so that every broken state is reported, not just
 * the first.
 */
export async function checkState(where: Case, state: Tree, recoveryOf?: Tree): Promise<Checked> {
  const { stateHome } = where.place;
  materialise(state);
  const broken = clashingRows(state, stateHome).map((clash) => `registry rows: ${clash}`);
  if (recoveryOf !== undefined)
    broken.push(...where.roots.flatMap((root) => effectWithoutRecord(state, recoveryOf, stateHome, root)));
  const fenced = where.roots.map((root) => fencesIn(state, stateHome, root));
  const inspected = where.roots.map((root, index) => {
    const fences = fenced[index]!;
    const status = inspectWorkspace(openWorkspace(root, { stateHome })).status;
    if (fences.length > 0 && (status === 'absent' || status === 'stopped'))
      broken.push(`${root}: inspect answered ${status} with ${fences.join(', ')}`);
    return status;
  });
  try {
    await new Registry(stateHome).transaction(where.elsewhere, () => undefined);
  } catch (error) {
    broken.push(`a registry transaction of another workspace failed (${failureOf(error)})`);
  }
  const acquired: string[] = [];
  for (const [index, root] of where.roots.entries())
    if (fenced[index]!.length > 0) acquired.push(await refusedAcquire(stateHome, root, fenced[index]!, broken));
  const recovery: string[] = [];
  for (const root of where.roots) recovery.push(await recovered(stateHome, root, broken));
  if (broken.length === 0) for (const root of where.roots) await reacquired(stateHome, root, broken);
  return { inspected, recovery, acquired, broken };
}

/** While a fence of `root` remains, a new owner's acquire is refused (docs/persistence.md, "Crash safety"); answers how ('refused: <code>'), or 'acquired'. */
async function refusedAcquire(
  stateHome: string,
  root: string,
  fences: readonly string[],
  broken: string[],
): Promise<string> {
  let lease: Awaited<ReturnType<typeof acquireWorkspace>> | undefined;
  const code = await codeOfAsync(async () => {
    lease = await acquireWorkspace(openWorkspace(root, { stateHome }), OWNER_CONFIG, PARENT_ENDPOINT);
  });
  if (lease === undefined) return `refused: ${code}`;
  broken.push(`${root}: a new acquire succeeded with ${fences.join(', ')}`);
  await lease.release();
  return 'acquired';
}

/** The snapshot, then `recover` with its digest: recovered or clear, and nothing fencing the root after it. */
async function recovered(stateHome: string, root: string, broken: string[]): Promise<string> {
  let snapshot: FileRecoveryView;
  try {
    snapshot = recoveryView(root, { stateHome });
  } catch (error) {
    broken.push(`${root}: recoveryView refused (${failureOf(error)})`);
    return 'unreadable';
  }
  for (const { holder, verdict } of snapshot.holders)
    if (verdict !== 'absent') broken.push(`${root}: holder ${holder.pid} reads ${verdict}`);
  try {
    const outcome = await recover(root, { stateHome, expectedDigest: snapshot.digest, assertAuthority: () => {} });
    if (outcome.recovered === snapshot.clear)
      broken.push(`${root}: recover answered ${JSON.stringify(outcome)} for a snapshot with clear ${snapshot.clear}`);
  } catch (error) {
    broken.push(`${root}: recover failed (${failureOf(error)})`);
    return 'failed';
  }
  const left = serviceFences(stateHome, root);
  if (left.length > 0) broken.push(`${root}: fences left after recovery: ${left.join(', ')}`);
  const status = inspectWorkspace(openWorkspace(root, { stateHome })).status;
  if (status !== 'absent' && status !== 'stopped') broken.push(`${root}: inspect answered ${status} after recovery`);
  return snapshot.clear ? 'clear' : 'recovered';
}

/** A fresh acquire by this process, released: the root is `stopped` after it. */
async function reacquired(stateHome: string, root: string, broken: string[]): Promise<void> {
  const coordination = openWorkspace(root, { stateHome });
  try {
    await (await acquireWorkspace(coordination, OWNER_CONFIG, PARENT_ENDPOINT)).release();
  } catch (error) {
    broken.push(`${root}: a fresh acquire and release failed (${failureOf(error)})`);
    return;
  }
  const status = inspectWorkspace(coordination).status;
  if (status !== 'stopped') broken.push(`${root}: inspect answered ${status} after a fresh acquire and release`);
}
