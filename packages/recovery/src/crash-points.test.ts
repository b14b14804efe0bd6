import { unlinkSync } from 'node:fs';
import { posix } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  countsOf,
  createFolderSteps,
  createSteps,
  endpointOf,
  handPlaces,
  killAndReap,
  lockCreateSteps,
  lockRemoveSteps,
  makeWorkspace,
  messageOf,
  messagesOf,
  namesIn,
  pathExists,
  ownerFilesSteps,
  releaseServiceSteps,
  removeSteps,
  replaceSteps,
  serviceFences,
  shownStep,
} from '@leasehold/test-utils';
import {
  CHILD_ENDPOINT,
  OWNER_CONFIG,
  PARENT_ENDPOINT,
  coordinationOf,
  inTurns,
  journalRecords,
  judgeFenced,
  makePlace,
  ownerPlan,
  recoverWith,
  snapshotOf,
  runBatch,
  spawnOwner,
  type OwnerPlan,
  type TestPlace,
} from '../test/helpers.js';

afterEach(cleanUp);

// SPEC 10.3: an owner killed (SIGKILL) before any single mutating step of
// acquire, a phase change or release, or failing with an I/O error (EIO) at
// that step and then exiting, or killed while idle after a completed
// acquire, leaves a state where `inspect` never answers `absent` or
// `stopped` while a service fence remains and a new `acquire` is refused;
// `recover` with the current digest brings it to `stopped` (or finds it
// clear), taking over a registry lock the dead writer left; then a new
// `acquire` succeeds. The same holds once a left registry lock is deleted by
// hand, which lets the refused acquire be judged at that point too.

// ---- The expected step lists, written from SPEC 3 (how private-files publishes) and 5.3 (the order). ----
// Paths are shown relative to the test folder: `state` is the state home, `<ws>` the workspace's private root,
// `<temp>` a staged file and `<folder>` a staged folder.

const STAGING = 'state/v1/.staging';
const REGISTRY = 'state/v1/registry';
const WORKSPACE = 'state/v1/workspaces/<ws>';
const SERVICE = `${WORKSPACE}/service`;

const parentOf = (path: string) => (path === 'state' ? '<base>' : posix.dirname(path));
const madeFolder = (operation: string, path: string) => [`${operation} mkdir ${path}`, `${operation} fsync-directory ${parentOf(path)}`];
const lockTaken = lockCreateSteps(`${REGISTRY}/registry.lock`);
const lockRemoved = lockRemoveSteps(`${REGISTRY}/registry.lock`);
const serviceFolderPublished = createFolderSteps(SERVICE, ['format.json', 'config.json']);
/** After the transaction, outside the lock: the owner's files in SPEC 5.3 order (the registration follows). */
const ownerFilesCreated = ownerFilesSteps(WORKSPACE);

interface OperationCase {
  readonly name: string;
  readonly operation: OwnerPlan['operation'];
  /** Brings the fresh place to the state the operation starts from (run in this process). */
  readonly prepare?: (place: TestPlace, root: string) => Promise<void>;
  readonly expectedSteps: readonly string[];
}

const CASES: readonly OperationCase[] = [
  {
    name: 'acquire of a fresh workspace in a fresh state home',
    operation: 'acquire',
    expectedSteps: [
      ...madeFolder('directory', 'state'),
      ...madeFolder('directory', 'state/v1'),
      ...madeFolder('directory', REGISTRY),
      ...madeFolder('create', STAGING),
      // One registry transaction: the lock, the registry's initialisation, the row, the service folder.
      ...lockTaken,
      ...createSteps(`${REGISTRY}/format.json`),
      ...createSteps(`${REGISTRY}/roots.json`),
      ...replaceSteps(`${REGISTRY}/roots.json`),
      ...madeFolder('directory', 'state/v1/workspaces'),
      ...madeFolder('directory', WORKSPACE),
      ...serviceFolderPublished,
      ...lockRemoved,
      ...ownerFilesCreated,
      ...createSteps(`${SERVICE}/registration.json`),
    ],
  },
  {
    name: 'acquire over a stopped registration (acquired and released before)',
    operation: 'acquire',
    prepare: async (place, root) => {
      await (await coordinationOf(place, root).acquire(OWNER_CONFIG, endpointOf(45_000))).release();
    },
    expectedSteps: [...lockTaken, ...replaceSteps(`${REGISTRY}/roots.json`), ...lockRemoved, ...ownerFilesCreated, ...replaceSteps(`${SERVICE}/registration.json`)],
  },
  { name: "phase change to 'stopping'", operation: 'phase', expectedSteps: replaceSteps(`${SERVICE}/registration.json`) },
  {
    name: 'release',
    operation: 'release',
    expectedSteps: [
      ...releaseServiceSteps(SERVICE),
      // One registry transaction: the row, then the checkout lock last.
      ...lockTaken,
      ...replaceSteps(`${REGISTRY}/roots.json`),
      ...removeSteps(`${WORKSPACE}/checkout.lock`),
      ...lockRemoved,
    ],
  },
];

/** What one crash point showed, for the record. */
interface Outcome {
  readonly inspected: string;
  readonly recovery: 'recovered' | 'clear';
}

/**
 * From the state a dead owner left: `judgeFenced`; the snapshot names only
 * absent holders; `recover` with its digest resolves (recovered, or clear
 * when nothing fences); then no fence, checkout lock, registry lock or
 * take-over marker is left, `inspect` is `absent` or `stopped`, and a new
 * owner acquires and releases.
 */
async function recoverAndReacquire(place: TestPlace, root: string, label: string): Promise<Outcome> {
  const inspected = await judgeFenced(place, root, label);
  const places = handPlaces(place.stateHome, root);
  const snapshot = snapshotOf(place, root);
  // The registry lock is no fence: a dead writer's lock is for the next transaction to take over.
  expect(snapshot.fences.map((fence) => fence.path), label).not.toContain(places.registryLock);
  if (!snapshot.clear) {
    for (const { holder, status } of snapshot.holders) expect(status, `${label}: holder ${holder.pid}`).toBe('absent');
  } else {
    // Clear: nothing remains but the service format, config and a stopped registration, which name no holder.
    const kept = snapshot.fences.map((fence) => (fence.kind === 'registration' ? `registration:${fence.phase ?? ''}` : fence.kind));
    for (const kind of kept) expect(['service-format', 'service-config', 'registration:stopped'], label).toContain(kind);
    expect(snapshot.holders, label).toEqual([]);
  }
  const outcome = await recoverWith(place, root, snapshot.digest).catch((error: unknown) => {
    throw new Error(`${label}: recover failed (${String(error)}); fences ${JSON.stringify(snapshot.fences.map((fence) => fence.kind))}`, { cause: error });
  });
  if (snapshot.clear) {
    expect(outcome, label).toEqual({ recovered: false, reason: 'clear' });
    expect(journalRecords(place.stateHome), `${label}: a clear state needs no record`).toEqual([]);
  } else {
    expect(outcome, label).toMatchObject({ recovered: true });
    expect(journalRecords(place.stateHome), label).toHaveLength(1);
    // Recovery's own transaction took over a dead writer's lock, and removed its own.
    expect(namesIn(posix.dirname(places.registryLock)), label).toEqual(['format.json', 'roots.json']);
  }

  expect(serviceFences(place.stateHome, root), label).toEqual([]);
  expect(pathExists(places.checkoutLock), `${label}: the dead owner's checkout lock`).toBe(false);
  const coordination = coordinationOf(place, root);
  const after = coordination.inspect();
  expect(['absent', 'stopped'], `${label}: ${JSON.stringify(after)}`).toContain(after.status);

  const lease = await coordination.acquire(OWNER_CONFIG, PARENT_ENDPOINT);
  expect(coordination.inspect(), label).toMatchObject({ status: 'unavailable', owner: { pid: process.pid, endpoint: PARENT_ENDPOINT, phase: 'idle' } });
  await lease.release();
  expect(coordination.inspect().status, label).toBe('stopped');
  expect(namesIn(posix.dirname(places.registryLock)), label).toEqual(['format.json', 'roots.json']);
  return { inspected, recovery: snapshot.clear ? 'clear' : 'recovered' };
}

/** The dry run: the whole operation in a child, every step reported and checked against the expected list. */
async function dryRun(operationCase: OperationCase): Promise<string[]> {
  const place = makePlace();
  const root = makeWorkspace(place, 'workspace');
  await operationCase.prepare?.(place, root);
  const child = spawnOwner(ownerPlan(place, root, operationCase.operation));
  const done = await messageOf(child, 'done');
  expect(await child.closed).toMatchObject({ code: 0, signal: null });
  const steps = messagesOf(child, 'step').map((message) => shownStep(message, place, root));
  console.log(`${operationCase.name}: ${steps.length} steps\n${steps.map((step, index) => `  ${index + 1}. ${step}`).join('\n')}`);
  expect(steps).toEqual(operationCase.expectedSteps);
  expect(done.steps).toBe(steps.length);
  await cleanUp();
  return steps;
}

/** A fresh place, prepared for the operation. */
async function preparedPlace(operationCase: OperationCase): Promise<{ place: TestPlace; root: string }> {
  const place = makePlace();
  const root = makeWorkspace(place, 'workspace');
  await operationCase.prepare?.(place, root);
  return { place, root };
}

/** A fresh place where the owner child was killed before step `killAt` (or after the last step). */
async function killed(operationCase: OperationCase, killAt: number | 'end', stepCount: number): Promise<{ place: TestPlace; root: string }> {
  const { place, root } = await preparedPlace(operationCase);
  const child = spawnOwner(ownerPlan(place, root, operationCase.operation, killAt));
  const end = await child.closed;
  expect(end, `killed at ${killAt}: ${end.stderr}`).toMatchObject({ code: null, signal: 'SIGKILL' });
  expect(messagesOf(child, 'step').map((message) => (message.step as { n: number }).n).at(-1)).toBe(killAt === 'end' ? stepCount : killAt);
  return { place, root };
}

/**
 * Fresh places where the operation failed with EIO at each of `failAts`, one
 * place per step, all run by one owner process that then exited (owners.mjs):
 * each state is as a failing disk and an exited process left it.
 */
async function failed(operationCase: OperationCase, failAts: readonly number[], steps: readonly string[]) {
  const places: { place: TestPlace; root: string }[] = [];
  for (let index = 0; index < failAts.length; index += 1) places.push(await preparedPlace(operationCase));
  const runs = places.map(({ place, root }, index) => ({ workspace: root, stateHome: place.stateHome, endpoint: CHILD_ENDPOINT, failAt: failAts[index]! }));
  const reports = await runBatch('owners.mjs', { operation: operationCase.operation, config: OWNER_CONFIG, runs, end: 'exit' });
  return places.map(({ place, root }, index) => {
    const report = reports[index]!;
    // The step that failed is the dry run's step of that number.
    expect(report.step === null ? null : shownStep({ step: report.step }, place, root)).toBe(steps[failAts[index]! - 1]);
    return { place, root, failed: String(report.failed) };
  });
}

let recovered = { killed: 0, failing: 0 };

/** Logs what the crash points of one operation showed. */
function logOutcomes(name: string, kind: 'killed' | 'failing', count: number, outcomes: readonly Outcome[], withoutLock: readonly Outcome[], answers: readonly string[]) {
  recovered = { ...recovered, [kind]: recovered[kind] + count };
  console.log(`${name} (${kind}): recovered ${count} crash points (and ${withoutLock.length} with the registry lock deleted by hand)`, {
    ...(kind === 'failing' ? { 'the operation answered': countsOf(answers) } : {}),
    'inspect before recovery': countsOf(outcomes.map((outcome) => outcome.inspected)),
    recovery: countsOf(outcomes.map((outcome) => outcome.recovery)),
    'lock deleted: inspect before recovery': countsOf(withoutLock.map((outcome) => outcome.inspected)),
    'lock deleted: recovery': countsOf(withoutLock.map((outcome) => outcome.recovery)),
  });
}

const lockLeft = (place: TestPlace) => pathExists(handPlaces(place.stateHome, '/').registryLock);

/** Every kill point of one operation (two at a time): as left, then (where a registry lock was left) with it deleted by hand. */
async function everyKillPoint(operationCase: OperationCase): Promise<void> {
  const steps = await dryRun(operationCase);
  const points: (number | 'end')[] = [...steps.map((_, index) => index + 1), 'end'];
  const results = await inTurns(points, 2, async (killAt) => {
    const label = `${operationCase.name}, ${killAt === 'end' ? 'killed after the last step' : `killed before step ${killAt}: ${steps[killAt - 1]}`}`;
    const left = await killed(operationCase, killAt, steps.length);
    const hadLock = lockLeft(left.place);
    const asLeft = await recoverAndReacquire(left.place, left.root, label);
    if (!hadLock) return { asLeft };
    const again = await killed(operationCase, killAt, steps.length);
    unlinkSync(handPlaces(again.place.stateHome, again.root).registryLock);
    return { asLeft, withoutLock: await recoverAndReacquire(again.place, again.root, `${label}, registry lock deleted by hand`) };
  });
  await cleanUp();
  const outcomes = results.map((result) => result.asLeft);
  const withoutLock = results.flatMap((result) => (result.withoutLock === undefined ? [] : [result.withoutLock]));
  logOutcomes(operationCase.name, 'killed', points.length, outcomes, withoutLock, []);
}

/** Every I/O error point of one operation: as left, then (where a registry lock was left) with it deleted by hand. */
async function everyFailingPoint(operationCase: OperationCase): Promise<void> {
  const steps = await dryRun(operationCase);
  const failAts = steps.map((_, index) => index + 1);
  const label = (failAt: number) => `${operationCase.name}, failing with EIO at step ${failAt}: ${steps[failAt - 1]}`;
  const left = await failed(operationCase, failAts, steps);
  const outcomes: Outcome[] = [];
  const withLock: number[] = [];
  for (const [index, { place, root }] of left.entries()) {
    if (lockLeft(place)) withLock.push(failAts[index]!);
    outcomes.push(await recoverAndReacquire(place, root, label(failAts[index]!)));
  }
  await cleanUp();
  const withoutLock: Outcome[] = [];
  for (const [index, { place, root }] of (await failed(operationCase, withLock, steps)).entries()) {
    unlinkSync(handPlaces(place.stateHome, root).registryLock);
    withoutLock.push(await recoverAndReacquire(place, root, `${label(withLock[index]!)}, registry lock deleted by hand`));
  }
  await cleanUp();
  logOutcomes(operationCase.name, 'failing', failAts.length, outcomes, withoutLock, left.map((point) => point.failed));
}

describe('recovery from every crash point of an owner (SPEC 10.3)', () => {
  for (const operationCase of CASES) {
    it(`${operationCase.name}: killed before each step`, () => everyKillPoint(operationCase));
    it(`${operationCase.name}: an I/O error at each step, then the process exits`, () => everyFailingPoint(operationCase));
  }

  it('a running owner killed with kill -9 while idle', async () => {
    const place = makePlace();
    const root = makeWorkspace(place, 'workspace');
    const coordination = coordinationOf(place, root);
    const owner = spawnOwner(ownerPlan(place, root, 'acquire', 'hold'));
    await messageOf(owner, 'held');
    expect(coordination.inspect()).toMatchObject({ status: 'unavailable', owner: { pid: owner.pid, phase: 'idle' } });
    expect(await killAndReap(owner)).toMatchObject({ code: null, signal: 'SIGKILL' });

    const snapshot = snapshotOf(place, root);
    expect(snapshot.clear).toBe(false);
    expect(snapshot.fences.map((fence) => fence.kind)).toEqual([
      'registry-row',
      'service-format',
      'service-config',
      'registration',
      'owner-lock',
      'capability',
      'checkout-lock',
    ]);
    expect(snapshot.holders.map(({ holder, status }) => [holder.pid, status])).toEqual([[owner.pid, 'absent']]);
    expect(await recoverAndReacquire(place, root, 'kill -9 while idle')).toEqual({ inspected: 'unavailable', recovery: 'recovered' });
    console.log(`recovered crash points of acquire/phase/release so far: ${recovered.killed} killed, ${recovered.failing} failing with EIO`);
  });
});
