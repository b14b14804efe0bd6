import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { expect } from 'vitest';
import { decodeBytes, recoveryRecordSchema } from '@leasehold/contracts';
import { ServiceCoordination } from '@leasehold/coordination';
import { Registry, rootsOverlap } from '@leasehold/registry';
import {
  allCrashStates,
  baseTree,
  codeOfAsync,
  contentKey,
  decodeTrace,
  loopbackEndpoint,
  fencesOf,
  handPlaces,
  makeTemporaryFolder,
  makeWorkspace,
  materialise,
  nodeKey,
  serviceFences,
  spawnPlanned,
  type CrashPoint,
  type PowerLossProtocol,
  type TestPlace,
  type Tree,
  type TreeNode,
  type TraceOp,
} from '@leasehold/test-utils';
import { RECOVERY_RECORD_BYTES } from '../src/journal.js';
import { recover, recoverySnapshot } from '../src/recover.js';
import type { RecoveryState } from '../src/recovery-state.js';
import { CHILD_ENDPOINT, FIXTURES, OWNER_CONFIG, PARENT_ENDPOINT, deadOwner } from './helpers.js';

// The power-loss harness (docs/persistence.md, "Power-loss exploration"),
// for src/power-loss*.test.ts through ./power-loss-table.ts (every protocol
// at every crash point, then which fsyncs the model needs,
// ./power-loss-fsyncs.ts). A child (fixtures/power-loss-recorder.mjs) records
// the trace of the one operation and exits; then, for every crash point and
// every state the model of @leasehold/test-utils yields (its README states
// it), this process writes the state at the same state-home path (documents
// name absolute paths) and checks crash safety (docs/persistence.md, "Crash
// safety") on it after the "reboot" (every holder is a dead process):
// recovery can read it, `inspect` never answers `absent` or `stopped` while a
// service fence remains, a new acquire is refused while one remains, a
// registry lock the crash left is taken over by a transaction of another
// workspace, `recover` with the current digest brings it to `stopped` and a
// fresh acquire succeeds, and no two registry rows overlap or share an
// endpoint; inside a recovery, that its journal record is durable before its
// first effect (docs/ownership.md, "The journal record"); and, after the last
// op, that what the call did is durable (docs/persistence.md, "What a
// returned call promises").

/** The endpoint of the second root's reservation in the transaction protocol. */
const OTHER_ENDPOINT = loopbackEndpoint(45_003);


/** The plan of test/fixtures/power-loss-recorder.mjs (see its header). */
interface RecorderPlan {
  readonly protocol: PowerLossProtocol;
  readonly workspace: string;
  readonly otherWorkspace?: string;
  readonly stateHome: string;
  readonly treeRoot: string;
  readonly config: typeof OWNER_CONFIG;
  readonly endpoint: string;
  readonly otherEndpoint?: string;
}

export interface Protocol {
  readonly name: string;
  readonly protocol: PowerLossProtocol;
}

/** Every shipped protocol the harness records, in the order the tests run them. */
export const PROTOCOLS: readonly Protocol[] = [
  { name: 'acquire of a fresh workspace in a fresh state home', protocol: 'acquire-fresh' },
  { name: 'acquire over a stopped registration', protocol: 'acquire-stopped' },
  { name: 'phase idle -> stopping', protocol: 'phase' },
  { name: 'release', protocol: 'release' },
  { name: 'recovery of an owner killed with SIGKILL', protocol: 'recover' },
  { name: 'a registry transaction alone: a reservation of another root while this one is held', protocol: 'transaction' },
];

/**
 * How many tests share out one exploration's distinct states (`ExploreOptions.shard`): a
 * few hundred states each, so that every test stays far inside its bound (each state is
 * written, recovered and acquired for real) and passes alone.
 */
export const STATE_SHARDS: Readonly<Record<PowerLossProtocol, number>> = {
  'acquire-fresh': 24,
  'acquire-stopped': 8,
  phase: 1,
  release: 1,
  recover: 1,
  transaction: 1,
};

/**
 * Where the states are written: in memory (tmpfs) where the machine has it. What survives a
 * power loss is the model's to say, not the disk's, and each of thousands of states is
 * written and then checked through the real library, whose fsyncs would only cost time here.
 */
const STATES_PARENT = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();

/**
 * Where one protocol runs: the state home `<base>/home/state`, whose parent
 * `home` is the tree the trace is taken of (a fresh acquire makes the state
 * home itself), and the workspaces outside it, which no state touches.
 */
interface Case {
  readonly place: TestPlace;
  readonly home: string;
  readonly roots: readonly string[];
  /** A workspace no protocol touches: its registry transaction is "the next writer of any workspace" (docs/persistence.md, "Crash safety"). */
  readonly elsewhere: string;
}

function caseFor(protocol: PowerLossProtocol): Case {
  const base = makeTemporaryFolder('leasehold-power-loss-', STATES_PARENT);
  const home = join(base, 'home');
  mkdirSync(home, { mode: 0o700 });
  const place: TestPlace = { base, stateHome: join(home, 'state') };
  const roots = [makeWorkspace(place, 'workspace'), ...(protocol === 'transaction' ? [makeWorkspace(place, 'other')] : [])];
  return { place, home, roots, elsewhere: makeWorkspace(place, 'elsewhere') };
}

/** A tree node as the recorder prints it: a file's bytes in base64. */
type PrintedNode = Exclude<TreeNode, { kind: 'file' }> | { readonly kind: 'file'; readonly mode: number; readonly bytes: string; readonly inode: string };

/** The base tree a recorder printed, its file bytes back from base64. */
function baseOf(lines: readonly string[]): Tree {
  const line = lines.find((each) => each.startsWith('{"base":'));
  if (line === undefined) throw new Error('the recorder printed no base tree');
  const { base } = JSON.parse(line) as { base: { root: string; entries: Record<string, PrintedNode> } };
  const entries = Object.fromEntries(
    Object.entries(base.entries).map(([path, node]): [string, TreeNode] => [
      path,
      node.kind === 'file' ? { ...node, bytes: new Uint8Array(Buffer.from(node.bytes, 'base64')) } : node,
    ]),
  );
  return { root: base.root, entries };
}

/** Sets up the protocol's start (the recovery's dead owner here, the rest in the child), records it, and answers the base and the trace. */
async function recordedRun(protocol: PowerLossProtocol, where: Case): Promise<{ base: Tree; ops: TraceOp[] }> {
  const [root, other] = where.roots;
  if (protocol === 'recover') await deadOwner(where.place, root!);
  const plan: RecorderPlan = {
    protocol,
    workspace: root!,
    ...(other === undefined ? {} : { otherWorkspace: other, otherEndpoint: OTHER_ENDPOINT }),
    stateHome: where.place.stateHome,
    treeRoot: where.home,
    config: OWNER_CONFIG,
    endpoint: CHILD_ENDPOINT,
  };
  const child = spawnPlanned(FIXTURES, 'power-loss-recorder.mjs', plan);
  const end = await child.closed;
  expect(end, end.stderr).toMatchObject({ code: 0, signal: null });
  expect(child.lines.at(-1)).toBe('{"done":true}');
  return { base: baseOf(child.lines), ops: decodeTrace(child.lines) };
}

/** One protocol as the harness explores it: where it ran, the durable state it started from, its trace, and every crash point of that trace. */
export interface Recorded {
  readonly where: Case;
  readonly base: Tree;
  /** What the run left: the state home after the operation returned. */
  readonly finished: Tree;
  /** Inside a recovery: the state it started from, so that no effect is on disk without its journal record (docs/ownership.md, "The journal record"). */
  readonly recoveryOf?: Tree;
  readonly ops: readonly TraceOp[];
  readonly points: readonly CrashPoint[];
}

/** Records `protocol` in a child and computes its crash points; fails unless the trace replays to what the run left (no mutation escaped the hooks). */
export async function recordProtocol(protocol: PowerLossProtocol): Promise<Recorded> {
  const where = caseFor(protocol);
  const { base, ops } = await recordedRun(protocol, where);
  // The run's own end is a state of the last point: no mutation escaped the hooks, so the trace is whole.
  const finished = baseTree(where.home);
  const points = allCrashStates(base, ops);
  expect(points.at(-1)!.states.map(contentKey), 'the trace replays to what the run left').toContain(contentKey(finished));
  return { where, base, finished, ops, points, ...(protocol === 'recover' ? { recoveryOf: base } : {}) };
}

// ---- What a state holds, read from the tree itself (docs/ownership.md, "Words"), not through the packages under test. ----

/** The parsed JSON of a file of the tree; undefined when absent, 'unreadable' when it does not parse. */
function documentIn(tree: Tree, path: string): unknown {
  const node = tree.entries[relative(tree.root, path)];
  if (node === undefined) return undefined;
  if (node.kind !== 'file') return 'unreadable';
  try {
    return JSON.parse(Buffer.from(node.bytes).toString('utf8')) as unknown;
  } catch {
    return 'unreadable';
  }
}

/** The service fences of `root` in the tree (docs/ownership.md, "Words"); a fence file that does not parse counts, since it cannot be proved not to be one. */
function fencesIn(tree: Tree, stateHome: string, root: string): string[] {
  return fencesOf({ json: (path) => documentIn(tree, path), exists: (path) => tree.entries[relative(tree.root, path)] !== undefined }, stateHome, root);
}

interface Row {
  readonly root: string;
  readonly endpoint: string;
}

/** Every pair of registry rows in the tree that overlap or share an endpoint (docs/ownership.md, "Exclusion"), as text. */
function clashingRows(tree: Tree, stateHome: string): string[] {
  const document = documentIn(tree, handPlaces(stateHome, '/').roots);
  if (document === 'unreadable') return ['roots.json does not parse'];
  const rows = (document as { entries?: Row[] } | undefined)?.entries ?? [];
  return rows.flatMap((row, index) =>
    rows.slice(index + 1).flatMap((other) => {
      if (rootsOverlap(row.root, other.root)) return [`${row.root} overlaps ${other.root}`];
      if (row.endpoint === other.endpoint) return [`${row.root} and ${other.root} share ${row.endpoint}`];
      return [];
    }),
  );
}

/** A file's bytes in the tree as text (hex), or 'absent'. */
function bytesIn(tree: Tree, path: string): string {
  const node = tree.entries[relative(tree.root, path)];
  return node?.kind === 'file' ? Buffer.from(node.bytes).toString('hex') : (node?.kind ?? 'absent');
}

/**
 * For a crash inside a recovery: its record is durable before its first
 * effect (docs/ownership.md, "The journal record"). A state where any fence of `root` differs from the start
 * (`before`) holds a whole record of `root` (decoded with the real schema).
 */
function effectWithoutRecord(state: Tree, before: Tree, stateHome: string, root: string): string[] {
  const places = handPlaces(stateHome, root);
  const fenceFiles = [places.roots, places.registration, places.ownerLock, places.capability, places.checkoutLock];
  if (fenceFiles.every((path) => bytesIn(state, path) === bytesIn(before, path))) return [];
  const journal = `${relative(state.root, places.journal)}/`;
  const recorded = Object.entries(state.entries).some(([path, node]) => {
    if (!path.startsWith(journal) || node.kind !== 'file') return false;
    try {
      return decodeBytes(recoveryRecordSchema, node.bytes, RECOVERY_RECORD_BYTES, path).root === root;
    } catch {
      return false;
    }
  });
  return recorded ? [] : [`${root}: a recovery effect is on disk without a whole record in the journal`];
}

// ---- The checks on one state, with the real library. ----

/** What one state showed: each root's `inspect` before recovery and what recovery did, and every invariant it broke. */
interface Checked {
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
async function checkState(where: Case, state: Tree, recoveryOf?: Tree): Promise<Checked> {
  const { stateHome } = where.place;
  materialise(state);
  const broken = clashingRows(state, stateHome).map((clash) => `registry rows: ${clash}`);
  if (recoveryOf !== undefined) broken.push(...where.roots.flatMap((root) => effectWithoutRecord(state, recoveryOf, stateHome, root)));
  const fenced = where.roots.map((root) => fencesIn(state, stateHome, root));
  const inspected = where.roots.map((root, index) => {
    const fences = fenced[index]!;
    const status = new ServiceCoordination(root, { stateHome }).inspect().status;
    if (fences.length > 0 && (status === 'absent' || status === 'stopped')) broken.push(`${root}: inspect answered ${status} with ${fences.join(', ')}`);
    return status;
  });
  try {
    await new Registry(stateHome).transaction(where.elsewhere, () => undefined);
  } catch (error) {
    broken.push(`a registry transaction of another workspace failed (${failureOf(error)})`);
  }
  const acquired: string[] = [];
  for (const [index, root] of where.roots.entries()) if (fenced[index]!.length > 0) acquired.push(await refusedAcquire(stateHome, root, fenced[index]!, broken));
  const recovery: string[] = [];
  for (const root of where.roots) recovery.push(await recovered(stateHome, root, broken));
  if (broken.length === 0) for (const root of where.roots) await reacquired(stateHome, root, broken);
  return { inspected, recovery, acquired, broken };
}

/** While a fence of `root` remains, a new owner's acquire is refused (docs/persistence.md, "Crash safety"); answers how ('refused: <code>'), or 'acquired'. */
async function refusedAcquire(stateHome: string, root: string, fences: readonly string[], broken: string[]): Promise<string> {
  let lease: Awaited<ReturnType<ServiceCoordination['acquire']>> | undefined;
  const code = await codeOfAsync(async () => {
    lease = await new ServiceCoordination(root, { stateHome }).acquire(OWNER_CONFIG, PARENT_ENDPOINT);
  });
  if (lease === undefined) return `refused: ${code}`;
  broken.push(`${root}: a new acquire succeeded with ${fences.join(', ')}`);
  await lease.release();
  return 'acquired';
}

/** The snapshot, then `recover` with its digest: recovered or clear, and nothing fencing the root after it. */
async function recovered(stateHome: string, root: string, broken: string[]): Promise<string> {
  let snapshot: RecoveryState;
  try {
    snapshot = recoverySnapshot(root, { stateHome });
  } catch (error) {
    broken.push(`${root}: recoverySnapshot refused (${failureOf(error)})`);
    return 'unreadable';
  }
  for (const { holder, status } of snapshot.holders) if (status !== 'absent') broken.push(`${root}: holder ${holder.pid} reads ${status}`);
  try {
    const outcome = await recover(root, { stateHome, expectedDigest: snapshot.digest, assertAuthority: () => {} });
    if (outcome.recovered === snapshot.clear) broken.push(`${root}: recover answered ${JSON.stringify(outcome)} for a snapshot with clear ${snapshot.clear}`);
  } catch (error) {
    broken.push(`${root}: recover failed (${failureOf(error)})`);
    return 'failed';
  }
  const left = serviceFences(stateHome, root);
  if (left.length > 0) broken.push(`${root}: fences left after recovery: ${left.join(', ')}`);
  const status = new ServiceCoordination(root, { stateHome }).inspect().status;
  if (status !== 'absent' && status !== 'stopped') broken.push(`${root}: inspect answered ${status} after recovery`);
  return snapshot.clear ? 'clear' : 'recovered';
}

/** A fresh acquire by this process, released: the root is `stopped` after it. */
async function reacquired(stateHome: string, root: string, broken: string[]): Promise<void> {
  const coordination = new ServiceCoordination(root, { stateHome });
  try {
    await (await coordination.acquire(OWNER_CONFIG, PARENT_ENDPOINT)).release();
  } catch (error) {
    broken.push(`${root}: a fresh acquire and release failed (${failureOf(error)})`);
    return;
  }
  const status = coordination.inspect().status;
  if (status !== 'stopped') broken.push(`${root}: inspect answered ${status} after a fresh acquire and release`);
}

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
  const { untilFirstFinding = false, verdicts = new Map<string, Checked>(), familiar = [], shard = { index: 0, count: 1 } } = options;
  expect(points.filter((point) => point.capped).map((point) => point.point), 'capped crash points').toEqual([]);
  const distinct = distinctStates(points, where.home);
  const known = new Set(distinctStates(familiar, where.home).keys());
  const order = [...distinct].sort(([a], [b]) => Number(known.has(a)) - Number(known.has(b))).filter((_, position) => position % shard.count === shard.index);
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
  return { points: points.length, yielded, distinct: distinct.size, inShare: order.length, checkedNow, inspected, recovery, acquired, findings };
}

/** The tree without what no promise covers: the registry lock (not a fence, removed without a folder fsync; see the registry README) and the staging folder's entries (temps, swept by the next writer). */
function promised(tree: Tree, stateHome: string): Tree {
  const places = handPlaces(stateHome, '/');
  const lock = relative(tree.root, places.registryLock);
  const staging = `${relative(tree.root, places.staging)}/`;
  return { root: tree.root, entries: Object.fromEntries(Object.entries(tree.entries).filter(([path]) => path !== lock && !path.startsWith(staging))) };
}

/**
 * What a finished operation promised its caller (docs/persistence.md, "What
 * a returned call promises": durable before the call returns), which a power loss after it returned must not
 * take back: every state of the last crash point is the state the run left,
 * but for what `promised` leaves out. So an acquire's fences survive (else,
 * after the reboot, another owner would acquire without the recovery that
 * reviews what the dead one left), a reservation's row, a phase; and a
 * release or recovery stays done: a cleanly stopped workspace needs no
 * `leasehold recover` after a power loss.
 */
export function promiseBroken(recorded: Pick<Recorded, 'where' | 'finished'>, last: CrashPoint): string[] {
  const { stateHome } = recorded.where.place;
  const finished = promised(recorded.finished, stateHome);
  const expected = contentKey(finished);
  const differing = last.states.map((state) => promised(state, stateHome)).filter((state) => contentKey(state) !== expected);
  if (differing.length === 0) return [];
  const paths = new Set(differing.flatMap((state) => changedPaths(state, finished)));
  return [`after the operation returned, ${differing.length} state(s) differ from what it left, at ${[...paths].sort().join(', ')}`];
}

/** The paths at which two trees differ (by kind, mode, bytes or target). */
function changedPaths(a: Tree, b: Tree): string[] {
  const keyAt = (tree: Tree, path: string) => {
    const node = tree.entries[path];
    return node === undefined ? 'absent' : nodeKey(node);
  };
  const paths = new Set([...Object.keys(a.entries), ...Object.keys(b.entries)]);
  return [...paths].filter((path) => keyAt(a, path) !== keyAt(b, path));
}
