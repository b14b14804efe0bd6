import { basename, dirname, relative } from 'node:path';
import { CRASH_STATE_CAP, allCrashStates, type CrashPoint, type TraceOp } from '@leasehold/test-utils';
import type { Recorded } from './power-loss.js';
import { exploreTrace, type ExploreOptions, type Verdicts } from './power-loss-exploration.js';
import { promiseBroken } from './power-loss-promises.js';

// Which fsyncs the persistence model needs, for the fsync tables of
// ./power-loss-table.ts. A protocol's recorded trace is explored
// again WITHOUT one of its fsyncs (an `fsync` of a file or an
// `fsync-directory` of a folder), for each in turn, with every check of
// src/power-loss.test.ts (the harness, ./power-loss.ts), the promise of the
// finished operation included (docs/persistence.md, "What a returned call
// promises": durable before the call returns). An fsync is NEEDED ALONE when some state then breaks an
// invariant (the exploration stops at the first). Two that cover each other
// (two fsyncs of one folder) are each not needed alone, which says nothing
// of dropping both; so the not-needed ones are then dropped one by one, in
// trace order, each kept dropped while every state still holds: what is left
// is a sound set no fsync of which can be dropped as well (or not proved
// to be: a drop that leaves more states at one crash point than the
// enumeration's cap keeps its fsync). The figures are
// pinned fsync by fsync in @leasehold/test-utils' PROVED_FSYNCS (the bench
// prints against them), so a protocol change that adds or removes a needed
// fsync shows; each fsync's drop is a test of its own, which asserts the
// pinned outcome, the one-by-one pass with the earlier drops taken from the
// pinned figures, so that each test stands alone.
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
export interface Fsync {
  readonly index: number;
  readonly label: string;
  readonly registryLock: boolean;
}

/** The op's name for the record: its action and path relative to the state home, a staged temp's name elided. */
function opName(stateHome: string, op: TraceOp | undefined): string {
  if (op === undefined) return 'nothing';
  const path = (relative(stateHome, op.path) || '.')
    .replace(/\.staging\/[^/]+\.dir(\/|$)/, '.staging/<folder>$1')
    .replace(/\.staging\/[^/]+\.tmp$/, '.staging/<temp>');
  return `${op.op} ${path}`;
}

/** Whether the op is the link or the unlink of registry.lock (not its replace by a take-over). */
export function isLockPublication(op: TraceOp): boolean {
  return (
    (op.op === 'link' || op.op === 'unlink') &&
    basename(op.path) === 'registry.lock' &&
    basename(dirname(op.path)) === 'registry'
  );
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

/** The trace's fsyncs, in trace order (the `n`-th is `fsyncsOf(recorded)[n - 1]`). */
export function fsyncsOf(recorded: Recorded): Fsync[] {
  const { ops } = recorded;
  const { stateHome } = recorded.where.place;
  return ops.flatMap((op, index) => {
    if (op.op !== 'fsync' && op.op !== 'fsync-directory') return [];
    const label = `#${index} ${opName(stateHome, op)} (after ${opName(stateHome, ops[index - 1])}${context(ops, index, stateHome)})`;
    return [{ index, label, registryLock: isRegistryLockFsync(ops, index) }];
  });
}

/** A trace without some ops: its crash points, and those under the enumeration's cap. */
interface Variant {
  readonly points: readonly CrashPoint[];
  readonly explorable: readonly CrashPoint[];
}

/** The variants already enumerated, by recording and dropped ops: each share of one drop's exploration is a test, and they all explore the same one. */
const variants = new WeakMap<Recorded, Map<string, Variant>>();

/** The crash points of the recorded trace without the ops at `dropped` (enumerated once per recording and drop). */
function variantOf(recorded: Recorded, dropped: readonly number[]): Variant {
  const known = variants.get(recorded) ?? new Map<string, Variant>();
  variants.set(recorded, known);
  const key = dropped.join(',');
  const cached = known.get(key);
  if (cached !== undefined) return cached;
  const points = allCrashStates(
    recorded.base,
    recorded.ops.filter((_, index) => !dropped.includes(index)),
  );
  const variant = { points, explorable: points.filter((point) => !point.capped) };
  known.set(key, variant);
  return variant;
}

/** What dropping some fsyncs showed: every state holds, one breaks (the first found), or too many states to tell. */
export type Outcome = { readonly kind: 'holds' } | { readonly kind: 'broken' | 'unproved'; readonly why: string };

/**
 * Explores the trace without the ops at `dropped`: the promise of the
 * finished operation first (its last point alone), then every distinct state
 * (those the whole trace does not leave first) until the first broken one.
 * A crash point with more states than the enumeration's cap yields only some
 * of them: a broken one among those (or among the other points') still
 * proves the drop breaks, but none broken proves nothing, `unproved`. Only
 * the points under the cap are explored (those over it would take long and
 * could not show the drop holds anyway), the promise on whatever states the
 * last point yielded. With `shard`, only that share of the states is
 * explored (the promise is checked by every share).
 */
export async function without(
  recorded: Recorded,
  dropped: readonly number[],
  verdicts: Verdicts,
  shard?: ExploreOptions['shard'],
): Promise<Outcome> {
  const { points, explorable } = variantOf(recorded, dropped);
  const promise = promiseBroken(recorded, points.at(-1)!);
  if (promise.length > 0) return { kind: 'broken', why: `${promise[0]} (the promise of the finished operation)` };
  const explored = await exploreTrace(recorded, explorable, {
    untilFirstFinding: true,
    verdicts,
    familiar: recorded.points,
    ...(shard === undefined ? {} : { shard }),
  });
  const first = explored.findings[0];
  if (first !== undefined) return { kind: 'broken', why: `${first.at}: ${first.broken.join('; ')}` };
  const over = points.find((point) => point.capped);
  return over === undefined
    ? { kind: 'holds' }
    : { kind: 'unproved', why: `over ${CRASH_STATE_CAP} states at crash point ${over.point}` };
}
