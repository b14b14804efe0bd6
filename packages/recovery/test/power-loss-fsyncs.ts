import { basename, dirname, relative } from 'node:path';
import { expect } from 'vitest';
import { CRASH_STATE_CAP, PROVED_FSYNCS, allCrashStates, type PowerLossProtocol, type TraceOp } from '@leasehold/test-utils';
import { exploreTrace, promiseBroken, recordProtocol, type Recorded, type Verdicts } from './power-loss.js';

// Issue 13: which fsyncs the persistence model needs, for
// src/power-loss-fsyncs*.test.ts. A protocol's recorded trace is explored
// again WITHOUT one of its fsyncs (an `fsync` of a file or an
// `fsync-directory` of a folder), for each in turn, with every check of
// src/power-loss.test.ts (the harness, ./power-loss.ts), the promise of the
// finished operation included (SPEC principle 3: durable before the call
// returns). An fsync is NEEDED ALONE when some state then breaks an
// invariant (the exploration stops at the first). Two that cover each other
// (two fsyncs of one folder) are each not needed alone, which says nothing
// of dropping both; so the not-needed ones are then dropped one by one, in
// trace order, each kept dropped while every state still holds: what is left
// is a sound set no fsync of which can be dropped as well (or not proved
// to be: a drop that leaves more states at one crash point than the
// enumeration's cap keeps its fsync). The figures are
// pinned in @leasehold/test-utils' PROVED_FSYNCS (the bench prints against
// them), so a protocol change that adds or removes a needed fsync shows.
// "Not needed" is a claim about the model (the README of
// @leasehold/test-utils), which counts on nothing ext4, XFS or btrfs keep
// beyond it.
//
// This exploration showed that the two registry folder fsyncs right after
// registry.lock is linked and right after it is unlinked were not needed,
// alone or together, in every protocol that takes the lock; they are gone
// (private-files `{ syncFolder: false }`, registry `LOCK_PUBLISH`). The
// traces are checked to have none any more.

/** One fsync of a trace: where it is, and its name for the record (paths relative to the state home, a staged temp's name elided). */
interface Fsync {
  readonly index: number;
  readonly label: string;
  readonly registryLock: boolean;
}

/** The op's name for the record: its action and path relative to the state home, a staged temp's name elided. */
function opName(stateHome: string, op: TraceOp | undefined): string {
  if (op === undefined) return 'nothing';
  const path = (relative(stateHome, op.path) || '.').replace(/\.staging\/[^/]+\.dir(\/|$)/, '.staging/<folder>$1').replace(/\.staging\/[^/]+\.tmp$/, '.staging/<temp>');
  return `${op.op} ${path}`;
}

/** Whether the op is the link or the unlink of registry.lock (not its replace by a take-over). */
function isLockPublication(op: TraceOp): boolean {
  return (op.op === 'link' || op.op === 'unlink') && basename(op.path) === 'registry.lock' && basename(dirname(op.path)) === 'registry';
}

/**
 * Whether the fsync at `index` is a registry-lock folder fsync, one of the
 * two removed: an `fsync-directory` of the registry folder whose last change
 * to that folder since the previous folder fsync is the link or unlink of
 * registry.lock.
 */
function isRegistryLockFsync(ops: readonly TraceOp[], index: number): boolean {
  const fsync = ops[index]!;
  if (fsync.op !== 'fsync-directory' || basename(fsync.path) !== 'registry') return false;
  const last = lastChangeIn(ops, index);
  return last !== undefined && isLockPublication(ops[last]!);
}

/**
 * What the step before an fsync does not say: for a file's fsync, the
 * publication that follows it; for a folder's, its last change to that
 * folder when that is not the step before (a staged temp's removal is).
 */
function context(ops: readonly TraceOp[], index: number, stateHome: string): string {
  const fsync = ops[index]!;
  if (fsync.op === 'fsync') return `; then ${opName(stateHome, ops[index + 1])}`;
  const last = lastChangeIn(ops, index);
  return last === undefined || last === index - 1 ? '' : `; its last change there: ${opName(stateHome, ops[last])}`;
}

/** The index of the last op before the folder fsync at `index`, since the previous folder fsync, that made or removed a name in that folder. */
function lastChangeIn(ops: readonly TraceOp[], index: number): number | undefined {
  const folder = ops[index]!.path;
  for (let at = index - 1; at >= 0 && ops[at]!.op !== 'fsync-directory'; at -= 1) {
    const op = ops[at]!;
    if (op.op !== 'fsync' && dirname(op.path) === folder) return at;
  }
  return undefined;
}

function fsyncsOf(recorded: Recorded): Fsync[] {
  const { ops } = recorded;
  const { stateHome } = recorded.where.place;
  return ops.flatMap((op, index) => {
    if (op.op !== 'fsync' && op.op !== 'fsync-directory') return [];
    const label = `#${index} ${opName(stateHome, op)} (after ${opName(stateHome, ops[index - 1])}${context(ops, index, stateHome)})`;
    return [{ index, label, registryLock: isRegistryLockFsync(ops, index) }];
  });
}

/** What dropping some fsyncs showed: every state holds, one breaks (the first found), or too many states to tell. */
type Outcome = { readonly kind: 'holds' } | { readonly kind: 'broken' | 'unproved'; readonly why: string };

/**
 * Explores the trace without the ops at `dropped`: the promise of the
 * finished operation first (its last point alone), then every distinct state
 * (those the whole trace does not leave first) until the first broken one.
 * A crash point with more states than the enumeration's cap yields only some
 * of them: a broken one among those (or among the other points') still
 * proves the drop breaks, but none broken proves nothing, `unproved`. Only
 * the points under the cap are explored (those over it would take long and
 * could not show the drop holds anyway), the promise on whatever states the
 * last point yielded.
 */
async function without(recorded: Recorded, dropped: readonly number[], verdicts: Verdicts): Promise<Outcome> {
  const { base, ops, points: familiar } = recorded;
  const points = allCrashStates(
    base,
    ops.filter((_, index) => !dropped.includes(index)),
  );
  const promise = promiseBroken(recorded, points.at(-1)!);
  if (promise.length > 0) return { kind: 'broken', why: `${promise[0]} (the promise of the finished operation)` };
  const explored = await exploreTrace(
    recorded,
    points.filter((point) => !point.capped),
    { untilFirstFinding: true, verdicts, familiar },
  );
  const first = explored.findings[0];
  if (first !== undefined) return { kind: 'broken', why: `${first.at}: ${first.broken.join('; ')}` };
  const over = points.find((point) => point.capped);
  return over === undefined ? { kind: 'holds' } : { kind: 'unproved', why: `over ${CRASH_STATE_CAP} states at crash point ${over.point}` };
}

/** The labels and reasons of the fsyncs with outcome `kind`. */
function withOutcome(outcomes: ReadonlyMap<Fsync, Outcome>, kind: Outcome['kind']): Record<string, string> {
  return Object.fromEntries([...outcomes].flatMap(([fsync, outcome]) => (outcome.kind === kind && 'why' in outcome ? [[fsync.label, outcome.why]] : [])));
}

/**
 * Every fsync of one protocol dropped alone, then those that were not needed
 * alone one by one (each kept dropped while every state holds); the figures
 * printed and checked against PROVED_FSYNCS.
 */
export async function exploreFsyncs(protocol: PowerLossProtocol): Promise<void> {
  const recorded = await recordProtocol(protocol);
  const verdicts: Verdicts = new Map();
  const fsyncs = fsyncsOf(recorded);
  const alone = new Map<Fsync, Outcome>();
  for (const fsync of fsyncs) alone.set(fsync, await without(recorded, [fsync.index], verdicts));
  const dropped: Fsync[] = [];
  const together = new Map<Fsync, Outcome>();
  for (const [fsync, outcome] of alone) {
    if (outcome.kind !== 'holds') continue;
    const more = await without(recorded, [...dropped, fsync].map((each) => each.index), verdicts);
    together.set(fsync, more);
    if (more.kind === 'holds') dropped.push(fsync);
  }
  const count = (outcomes: ReadonlyMap<Fsync, Outcome>, kind: Outcome['kind']) => [...outcomes.values()].filter((outcome) => outcome.kind === kind).length;
  const figures = {
    fsyncs: fsyncs.length,
    neededAlone: count(alone, 'broken'),
    keptTogether: count(together, 'broken'),
    unproved: count(alone, 'unproved') + count(together, 'unproved'),
    sufficient: fsyncs.length - dropped.length,
  };
  const lockPublications = recorded.ops.filter(isLockPublication).length;
  console.log(
    `${protocol}: ${recorded.ops.length} ops, ${JSON.stringify(figures)} (${verdicts.size} distinct states checked; ` +
      `${lockPublications === 0 ? 'the registry lock not taken' : `registry.lock linked and unlinked ${lockPublications} times`}); ` +
      `droppable together: ${dropped.map((each) => each.label).join('; ') || 'none'}`,
    {
      'needed alone': withOutcome(alone, 'broken'),
      'kept, once those before it were dropped': withOutcome(together, 'broken'),
      unproved: { ...withOutcome(alone, 'unproved'), ...withOutcome(together, 'unproved') },
    },
  );
  expect(figures).toEqual(PROVED_FSYNCS[protocol]);
  // Issue 13: the registry lock is published and removed without a registry folder fsync of its own, in every protocol.
  expect(fsyncs.filter((fsync) => fsync.registryLock).map((fsync) => fsync.label)).toEqual([]);
  // And the lock is still taken where it was (link and unlink, once each), so the absence above is not vacuous.
  expect(lockPublications).toBe(protocol === 'phase' ? 0 : 2);
  // No file fsync can go: each stages the bytes a link or rename then publishes, and without it the published name may
  // read empty, half or zeros (needed alone, or unproved where the states are too many to enumerate).
  expect([...alone].filter(([fsync, outcome]) => recorded.ops[fsync.index]!.op === 'fsync' && outcome.kind === 'holds').map(([fsync]) => fsync.label)).toEqual([]);
}
