// Exploring a recorded trace: every distinct state of every crash point, each checked once
// (./power-loss-checks.ts), in shares so that one exploration can be a table of tests.
import { relative } from 'node:path';
import { expect } from 'vitest';
import { contentKey, type CrashPoint, type Tree } from '@leasehold/test-utils';
import type { Recorded } from './power-loss.js';
import { checkState, type Checked } from './power-loss-checks.js';

/** `distinctStates` of each list of crash points already seen: every test of a table explores the same lists. */
const distinctOfPoints = new WeakMap<readonly CrashPoint[], Map<string, { state: Tree; at: string }>>();

/** The distinct states of all crash points, each with the first crash point that leaves it (keyed by content, which costs a hash of every state: once per list). */
function distinctStates(points: readonly CrashPoint[], home: string): Map<string, { state: Tree; at: string }> {
  const known = distinctOfPoints.get(points);
  if (known !== undefined) return known;
  const distinct = new Map<string, { state: Tree; at: string }>();
  distinctOfPoints.set(points, distinct);
  for (const { point, after, states } of points) {
    const at = `crash after op ${point}${after === undefined ? '' : ` (${after.op} ${relative(home, after.path)})`}`;
    for (const state of states) {
      const key = contentKey(state);
      if (!distinct.has(key)) distinct.set(key, { state, at });
    }
  }
  return distinct;
}

/** What an exploration of one trace found: the figures, and each distinct state that broke an invariant. */
export interface Exploration {
  readonly points: number;
  readonly yielded: number;
  readonly distinct: number;
  /** How many of the distinct states are in this exploration's share (all of them, unsharded). */
  readonly inShare: number;
  /** How many of the distinct states were checked in this exploration: not taken from `ExploreOptions.verdicts`, nor left after the first finding. */
  readonly checkedNow: number;
  readonly inspected: readonly string[];
  readonly recovery: readonly string[];
  readonly acquired: readonly string[];
  readonly findings: readonly { readonly at: string; readonly broken: readonly string[] }[];
}

/** What each state checked showed, by its content (`contentKey`). */
export type Verdicts = Map<string, Checked>;

/** How `exploreTrace` goes about it; by default every distinct state is checked and every finding reported. */
export interface ExploreOptions {
  /** Stop at the first state that breaks an invariant: answers whether one does, not which all do. */
  readonly untilFirstFinding?: boolean;
  /**
   * The verdicts of the states already checked in this case, read and added
   * to: a state that several traces of one case leave is checked once. Sound
   * because a check depends on the state alone (and on the recording's
   * `recoveryOf`, which is the case's).
   */
  readonly verdicts?: Verdicts;
  /**
   * The crash points of a trace whose states are known to hold (the whole
   * trace's, when `points` are a variant's): the states none of them leaves
   * are checked first, so a broken one shows early.
   */
  readonly familiar?: readonly CrashPoint[];
  /** Check only this share of the distinct states (every `count`-th from `index`, in the order they are checked), so that one exploration can be a table of tests. */
  readonly shard?: { readonly index: number; readonly count: number };
}

/** Every distinct state of every crash point, checked (see `ExploreOptions`); fails when the enumeration was capped. */
export async function exploreTrace(
  recorded: Pick<Recorded, 'where' | 'recoveryOf'>,
  points: readonly CrashPoint[],
  options: ExploreOptions = {},
): Promise<Exploration> {
  const { where, recoveryOf } = recorded;
  const {
    untilFirstFinding = false,
    verdicts = new Map<string, Checked>(),
    familiar = [],
    shard = { index: 0, count: 1 },
  } = options;
  expect(
    points.filter((point) => point.capped).map((point) => point.point),
    'capped crash points',
  ).toEqual([]);
  const distinct = distinctStates(points, where.home);
  const known = new Set(distinctStates(familiar, where.home).keys());
  const order = [...distinct]
    .sort(([a], [b]) => Number(known.has(a)) - Number(known.has(b)))
    .filter((_, position) => position % shard.count === shard.index);
  const inspected: string[] = [];
  const recovery: string[] = [];
  const acquired: string[] = [];
  const findings: { at: string; broken: readonly string[] }[] = [];
  let checkedNow = 0;
  for (const [key, { state, at }] of order) {
    let checked = verdicts.get(key);
    if (checked === undefined) {
      checked = await checkState(where, state, recoveryOf);
      verdicts.set(key, checked);
      checkedNow += 1;
    }
    inspected.push(...checked.inspected);
    recovery.push(...checked.recovery);
    acquired.push(...checked.acquired);
    if (checked.broken.length > 0) findings.push({ at, broken: checked.broken });
    if (untilFirstFinding && findings.length > 0) break;
  }
  const yielded = points.reduce((sum, point) => sum + point.states.length, 0);
  return {
    points: points.length,
    yielded,
    distinct: distinct.size,
    inShare: order.length,
    checkedNow,
    inspected,
    recovery,
    acquired,
    findings,
  };
}
