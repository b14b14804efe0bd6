import { unlinkSync } from 'node:fs';
import { posix } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { acquireWorkspace, inspectWorkspace } from '@leasehold/coordination';
import {
  cleanUp,
  countsOf,
  createFolderSteps,
  createSteps,
  loopbackEndpoint,
  handPlaces,
  killAndReap,
  lockCreateSteps,
  lockRemoveSteps,
  makePlace,
  makeWorkspace,
  messageOf,
  messagesOf,
  namesIn,
  markCreateSteps,
  markRemoveSteps,
  ownerFilesSteps,
  pathExists,
  releaseServiceSteps,
  removeSteps,
  replaceSteps,
  serviceFences,
  shownStep,
  spawnSharedFixture,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  CHILD_ENDPOINT,
  FIXTURE_MODULES,
  OWNER_CONFIG,
  PARENT_ENDPOINT,
  coordinationOf,
  journalRecords,
  judgeFenced,
  ownerPlan,
  recoverWith,
  viewOf,
  runBatch,
  type OwnerPlan,
} from '../test/helpers.js';

afterEach(cleanUp);

// Crash safety (docs/persistence.md, "Crash safety"): an owner killed (SIGKILL) before any single mutating step of
// acquire, a phase change or release, or failing with an I/O error (EIO) at
// that step and then exiting, or killed while idle after a completed
// acquire, leaves a state where `inspect` never answers `absent` or
// `stopped` while a service fence remains and a new `acquire` is refused;
// `recover` with the current digest brings it to `stopped` (or finds it
// clear), taking over a registry lock the dead writer left; then a new
// `acquire` succeeds. The same holds once a left registry lock is deleted by
// hand, which lets the refused acquire be judged at that point too.

// ---- The expected step lists, written from docs/persistence.md ("Publishing a file": how private-files publishes) and docs/ownership.md ("Acquire", "Release": the order). ----
// Paths are shown relative to the test folder: `state` is the state home, `<ws>` the workspace's private root,
// `<temp>` a staged file and `<folder>` a staged folder.

const STAGING = 'state/v1/.staging';
const REGISTRY = 'state/v1/registry';
const WORKSPACE = 'state/v1/workspaces/<ws>';
const SERVICE = `${WORKSPACE}/service`;
/** The workspace folder itself, where its own mark lives (`.leasehold/`). */
const FOLDER = 'workspaces/workspace';

const parentOf = (path: string) => (path === 'state' ? '<base>' : posix.dirname(path));
const madeFolder = (operation: string, path: string) => [
  `${operation} mkdir ${path}`,
  `${operation} fsync-directory ${parentOf(path)}`,
];
const lockTaken = lockCreateSteps(`${REGISTRY}/registry.lock`);
const lockRemoved = lockRemoveSteps(`${REGISTRY}/registry.lock`);
const serviceFolderPublished = createFolderSteps(SERVICE, ['format.json', 'config.json']);
/** After the transaction, outside the lock: the owner's files in acquire's order (docs/ownership.md, "Acquire"; the registration follows). */
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
      ...markCreateSteps(FOLDER, { newFolder: true }),
      ...ownerFilesCreated,
      ...createSteps(`${SERVICE}/registration.json`),
    ],
  },
  {
    name: 'acquire over a stopped registration (acquired and released before)',
    operation: 'acquire',
    prepare: async (place, root) => {
      await (await acquireWorkspace(coordinationOf(place, root), OWNER_CONFIG, loopbackEndpoint(45_000))).release();
    },
    expectedSteps: [
      ...lockTaken,
      ...replaceSteps(`${REGISTRY}/roots.json`),
      ...lockRemoved,
      ...markCreateSteps(FOLDER),
      ...ownerFilesCreated,
      ...replaceSteps(`${SERVICE}/registration.json`),
    ],
  },
  {
    name: "phase change to 'stopping'",
    operation: 'phase',
    expectedSteps: replaceSteps(`${SERVICE}/registration.json`),
  },
  {
    name: 'release',
    operation: 'release',
    expectedSteps: [
      ...releaseServiceSteps(SERVICE),
      ...markRemoveSteps(FOLDER),
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
  const snapshot = viewOf(place, root);
  // The registry lock is no fence: a dead writer's lock is for the next transaction to take over.
  expect(
    snapshot.fences.map((fence) => fence.path),
    label,
  ).not.toContain(places.registryLock);
  if (!snapshot.clear) {
    for (const { holder, verdict } of snapshot.holders)
      expect(verdict, `${label}: holder ${holder.pid}`).toBe('absent');
  } else {
    // Clear: nothing remains but the service format, config and a stopped registration, which name no holder.
    const kept = snapshot.fences.map((fence) =>
      fence.kind === 'registration' ? `registration:${fence.phase ?? ''}` : fence.kind,
    );
    for (const kind of kept)
      expect(['service-format', 'service-config', 'registration:stopped'], label).toContain(kind);
    expect(snapshot.holders, label).toEqual([]);
  }
  const outcome = await recoverWith(place, root, snapshot.digest).catch((error: unknown) => {
    throw new Error(
      `${label}: recover failed (${String(error)}); fences ${JSON.stringify(snapshot.fences.map((fence) => fence.kind))}`,
      { cause: error },
    );
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
  const after = inspectWorkspace(coordination);
  expect(['absent', 'stopped'], `${label}: ${JSON.stringify(after)}`).toContain(after.status);

  const lease = await acquireWorkspace(coordination, OWNER_CONFIG, PARENT_ENDPOINT);
  expect(inspectWorkspace(coordination), label).toMatchObject({
    status: 'unavailable',
    owner: { pid: process.pid, endpoint: PARENT_ENDPOINT, phase: 'idle' },
  });
  await lease.release();
  expect(inspectWorkspace(coordination).status, label).toBe('stopped');
  expect(namesIn(posix.dirname(places.registryLock)), label).toEqual(['format.json', 'roots.json']);
  return { inspected, recovery: snapshot.clear ? 'clear' : 'recovered' };
}

/** A step list as the log shows it, numbered. */
const numbered = (steps: readonly string[]) => steps.map((step, index) => `  ${index + 1}. ${step}`).join('\n');

/** The dry run: the whole operation in a child, every step reported and checked against the expected list. */
async function dryRun(operationCase: OperationCase): Promise<void> {
  const { place, root } = await preparedPlace(operationCase);
  const child = spawnSharedFixture('crasher', ownerPlan(place, root, operationCase.operation), FIXTURE_MODULES);
  const done = await messageOf(child, 'done');
  expect(await child.closed).toMatchObject({ code: 0, signal: null });
  const steps = messagesOf(child, 'step').map((message) => shownStep(message, place, root));
  console.log(`${operationCase.name}: ${steps.length} steps\n${numbered(steps)}`);
  expect(steps).toEqual(operationCase.expectedSteps);
  expect(done.steps).toBe(steps.length);
}

/** A fresh place, prepared for the operation. */
async function preparedPlace(operationCase: OperationCase): Promise<{ place: TestPlace; root: string }> {
  const place = makePlace('recovery');
  const root = makeWorkspace(place, 'workspace');
  await operationCase.prepare?.(place, root);
  return { place, root };
}

/**
 * A fresh place where the owner child was killed before step `killAt` (or
 * after the last step); the steps it reported are the expected list's up to
 * there, so the point is the step its title names.
 */
async function killed(
  operationCase: OperationCase,
  killAt: number | 'end',
): Promise<{ place: TestPlace; root: string }> {
  const { place, root } = await preparedPlace(operationCase);
  const child = spawnSharedFixture('crasher', ownerPlan(place, root, operationCase.operation, killAt), FIXTURE_MODULES);
  const end = await child.closed;
  expect(end, `killed at ${killAt}: ${end.stderr}`).toMatchObject({ code: null, signal: 'SIGKILL' });
  const steps = operationCase.expectedSteps;
  expect(messagesOf(child, 'step').map((message) => shownStep(message, place, root))).toEqual(
    killAt === 'end' ? steps : steps.slice(0, killAt),
  );
  return { place, root };
}

/**
 * A fresh place where the operation failed with EIO at step `failAt`, run by
 * an owner process (owners.mjs) that then exited: the state is as a failing
 * disk and an exited process left it.
 */
async function failed(
  operationCase: OperationCase,
  failAt: number,
): Promise<{ place: TestPlace; root: string; failed: string }> {
  const { place, root } = await preparedPlace(operationCase);
  const runs = [{ workspace: root, stateHome: place.stateHome, endpoint: CHILD_ENDPOINT, failAt }];
  const [report] = await runBatch('owners.mjs', {
    operation: operationCase.operation,
    config: OWNER_CONFIG,
    runs,
    end: 'exit',
  });
  // The step that failed is the expected list's step of that number.
  expect(report!.step === null ? null : shownStep({ step: report!.step }, place, root)).toBe(
    operationCase.expectedSteps[failAt - 1],
  );
  return { place, root, failed: String(report!.failed) };
}

/** What one crash point showed: as left, with the registry lock deleted by hand (where one was left), and what the operation answered. */
interface PointResult {
  readonly asLeft: Outcome;
  readonly withoutLock?: Outcome;
  readonly answered?: string;
}

const lockLeft = (place: TestPlace) => pathExists(handPlaces(place.stateHome, '/').registryLock);

/** Deletes the registry lock a dead writer left, by hand, then recovers. */
async function withLockDeleted(left: { place: TestPlace; root: string }, label: string): Promise<Outcome> {
  unlinkSync(handPlaces(left.place.stateHome, left.root).registryLock);
  return recoverAndReacquire(left.place, left.root, `${label}, registry lock deleted by hand`);
}

/** One kill point: recovered as left, then (where a registry lock was left) in a second fresh place with it deleted by hand. */
async function killPoint(operationCase: OperationCase, killAt: number | 'end', label: string): Promise<PointResult> {
  const left = await killed(operationCase, killAt);
  const hadLock = lockLeft(left.place);
  const asLeft = await recoverAndReacquire(left.place, left.root, label);
  if (!hadLock) return { asLeft };
  return { asLeft, withoutLock: await withLockDeleted(await killed(operationCase, killAt), label) };
}

/** One I/O error point: recovered as left, then (where a registry lock was left) in a second fresh place with it deleted by hand. */
async function failingPoint(operationCase: OperationCase, failAt: number, label: string): Promise<PointResult> {
  const left = await failed(operationCase, failAt);
  const hadLock = lockLeft(left.place);
  const asLeft = await recoverAndReacquire(left.place, left.root, label);
  if (!hadLock) return { asLeft, answered: left.failed };
  return {
    asLeft,
    answered: left.failed,
    withoutLock: await withLockDeleted(await failed(operationCase, failAt), label),
  };
}

/** Every crash point of a case: killed before step k, for k in 1..N, and once after the operation returned. */
const killPoints = (operationCase: OperationCase): (number | 'end')[] => [
  ...operationCase.expectedSteps.map((_, index) => index + 1),
  'end',
];
const killPointName = (operationCase: OperationCase, killAt: number | 'end') =>
  killAt === 'end'
    ? 'killed after the last step'
    : `killed before step ${killAt}: ${operationCase.expectedSteps[killAt - 1]}`;
const failingPointName = (operationCase: OperationCase, failAt: number) =>
  `failing with EIO at step ${failAt}: ${operationCase.expectedSteps[failAt - 1]}`;

/** Counts of the crash points recovered in this file, for the closing log (bookkeeping only). */
const recovered = { killed: 0, failing: 0 };

/** Logs what the crash points of one operation showed. */
function logOutcomes(name: string, kind: 'killed' | 'failing', results: readonly PointResult[]) {
  recovered[kind] += results.length;
  const outcomes = results.map((result) => result.asLeft);
  const withoutLock = results.flatMap((result) => (result.withoutLock === undefined ? [] : [result.withoutLock]));
  console.log(
    `${name} (${kind}): recovered ${results.length} crash points (and ${withoutLock.length} with the registry lock deleted by hand)`,
    {
      ...(kind === 'failing'
        ? { 'the operation answered': countsOf(results.map((result) => result.answered ?? '')) }
        : {}),
      'inspect before recovery': countsOf(outcomes.map((outcome) => outcome.inspected)),
      recovery: countsOf(outcomes.map((outcome) => outcome.recovery)),
      'lock deleted: inspect before recovery': countsOf(withoutLock.map((outcome) => outcome.inspected)),
      'lock deleted: recovery': countsOf(withoutLock.map((outcome) => outcome.recovery)),
    },
  );
}

afterAll(() =>
  console.log(
    `recovered crash points of acquire/phase/release: ${recovered.killed} killed, ${recovered.failing} failing with EIO`,
  ),
);

// One test per crash point (each a fresh place and its own child), so that each stays far inside its bound; the dry
// run, which proves the step list every point's title and checks rely on, is a test of its own.
for (const operationCase of CASES)
  describe(`recovery from every crash point of an owner leaves it fenced: ${operationCase.name}`, () => {
    const killedResults: PointResult[] = [];
    const failingResults: PointResult[] = [];
    afterAll(() => {
      logOutcomes(operationCase.name, 'killed', killedResults);
      logOutcomes(operationCase.name, 'failing', failingResults);
    });

    it('the dry run reports exactly the steps written from docs/ownership.md and docs/persistence.md', () =>
      dryRun(operationCase));

    for (const killAt of killPoints(operationCase)) {
      const name = killPointName(operationCase, killAt);
      it(name, async () => {
        killedResults.push(await killPoint(operationCase, killAt, `${operationCase.name}, ${name}`));
      });
    }

    for (const [index] of operationCase.expectedSteps.entries()) {
      const name = failingPointName(operationCase, index + 1);
      it(`${name}, then the process exits`, async () => {
        failingResults.push(await failingPoint(operationCase, index + 1, `${operationCase.name}, ${name}`));
      });
    }
  });

describe('recovery of an owner killed while idle (docs/persistence.md, "Crash safety")', () => {
  it('a running owner killed with kill -9 while idle', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'workspace');
    const coordination = coordinationOf(place, root);
    const owner = spawnSharedFixture('crasher', ownerPlan(place, root, 'acquire', 'hold'), FIXTURE_MODULES);
    await messageOf(owner, 'held');
    expect(inspectWorkspace(coordination)).toMatchObject({
      status: 'unavailable',
      owner: { pid: owner.pid, phase: 'idle' },
    });
    expect(await killAndReap(owner)).toMatchObject({ code: null, signal: 'SIGKILL' });

    const snapshot = viewOf(place, root);
    expect(snapshot.clear).toBe(false);
    expect(snapshot.fences.map((fence) => fence.kind)).toEqual([
      'registry-row',
      'service-format',
      'service-config',
      'registration',
      'owner-lock',
      'capability',
      'checkout-lock',
      'folder-mark',
    ]);
    expect(snapshot.holders.map(({ holder, verdict }) => [holder.pid, verdict])).toEqual([[owner.pid, 'absent']]);
    expect(await recoverAndReacquire(place, root, 'kill -9 while idle')).toEqual({
      inspected: 'unavailable',
      recovery: 'recovered',
    });
  });
});
