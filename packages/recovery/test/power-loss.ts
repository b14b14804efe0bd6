import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import {
  allCrashStates,
  baseTree,
  contentKey,
  decodeTrace,
  loopbackEndpoint,
  makeTemporaryFolder,
  makeWorkspace,
  spawnPlanned,
  type CrashPoint,
  type PowerLossProtocol,
  type TestPlace,
  type Tree,
  type TreeNode,
  type TraceOp,
} from '@leasehold/test-utils';
import { CHILD_ENDPOINT, FIXTURES, OWNER_CONFIG, deadOwner } from './helpers.js';

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
//
// This file records a protocol and its crash points; ./power-loss-exploration.ts
// checks every state of them (./power-loss-checks.ts, on what
// ./power-loss-tree-reads.ts reads from a state by hand), and
// ./power-loss-promises.ts what a finished call promised.

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
  {
    name: 'a registry transaction alone: a reservation of another root while this one is held',
    protocol: 'transaction',
  },
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
 * Where one protocol runs: the state home `<base>/home/state` and the
 * workspaces `<base>/home/workspaces/*`, whose parent `home` is the tree the
 * trace is taken of (a fresh acquire makes the state home itself; the folder's
 * own mark is made in the workspace).
 */
export interface Case {
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
  const place: TestPlace = { base: home, stateHome: join(home, 'state') };
  const roots = [
    makeWorkspace(place, 'workspace'),
    ...(protocol === 'transaction' ? [makeWorkspace(place, 'other')] : []),
  ];
  return { place, home, roots, elsewhere: makeWorkspace(place, 'elsewhere') };
}

/** A tree node as the recorder prints it: a file's bytes in base64. */
type PrintedNode =
  | Exclude<TreeNode, { kind: 'file' }>
  | { readonly kind: 'file'; readonly mode: number; readonly bytes: string; readonly inode: string };

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
  expect(points.at(-1)!.states.map(contentKey), 'the trace replays to what the run left').toContain(
    contentKey(finished),
  );
  return { where, base, finished, ops, points, ...(protocol === 'recover' ? { recoveryOf: base } : {}) };
}
