import { linkSync, renameSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  countsOf,
  createSteps,
  handPlaces,
  lockCreateSteps,
  lockRemoveSteps,
  makePlace,
  makeWorkspace,
  messageOf,
  messagesOf,
  namesIn,
  pathExists,
  markRemoveSteps,
  releaseServiceSteps,
  removeSteps,
  replaceSteps,
  serviceFences,
  shownStep,
  spawnPlanned,
  type TestPlace,
} from '@leasehold/test-utils';
import type { MutationStep } from '@leasehold/private-files';
import { acquireWorkspace, inspectWorkspace } from '@leasehold/coordination';
import {
  CHILD_ENDPOINT,
  FIXTURES,
  OWNER_CONFIG,
  PARENT_ENDPOINT,
  coordinationOf,
  journalRecords,
  judgeFenced,
  recoverWith,
  runBatch,
  viewOf,
  type RecovererPlan,
} from '../test/helpers.js';

afterEach(cleanUp);

// Crash safety (docs/persistence.md, "Crash safety") for recovery itself: a recovery killed (SIGKILL) before any
// single mutating step of its own, or failing with an I/O error (EIO) at that
// step and then exiting, leaves a state where `inspect` never answers
// `absent` or `stopped` while a service fence remains, where a new `acquire`
// is refused, and which a second recovery (with a new snapshot's digest)
// brings to `stopped`, after which `acquire` succeeds. A registry lock the
// dead recovery left is taken over by the second one; while it is set aside
// by hand, a new `acquire` is judged at that point too.

const REGISTRY = 'state/v1/registry';
const WORKSPACE = 'state/v1/workspaces/<ws>';
const SERVICE = `${WORKSPACE}/service`;
/** The take-over marker of a dead holder's lock, shown without its token. */
const MARKER = `${REGISTRY}/takeover-<token>.lock`;

/** The journal record first, written before the first effect (docs/ownership.md, "The journal record"). */
const journalRecorded = [
  'directory mkdir state/v1/journal',
  'directory fsync-directory state/v1',
  ...createSteps('state/v1/journal/<record>'),
];
/** The effects on the service folder, in release order (one folder fsync for the three), then the folder's own mark. */
const serviceEffects = [...releaseServiceSteps(SERVICE), ...markRemoveSteps('workspaces/workspace')];
/** A dead holder's registry lock taken over: the marker (exclusive), the lock replaced, the marker swept. */
const lockTakenOver = [...createSteps(MARKER), ...replaceSteps(`${REGISTRY}/registry.lock`), ...removeSteps(MARKER)];
/** In the transaction: the row, then the checkout lock; then its lock removed. */
const rowAndCheckout = [
  ...replaceSteps(`${REGISTRY}/roots.json`),
  ...removeSteps(`${WORKSPACE}/checkout.lock`),
  ...lockRemoveSteps(`${REGISTRY}/registry.lock`),
];

/** A fresh place with one workspace. */
interface Place {
  readonly place: TestPlace;
  readonly root: string;
}

interface DeadOwnerCase {
  readonly name: string;
  /** Leaves a dead owner in every place, all run by one owner process (owners.mjs) that is gone afterwards. */
  readonly kill: (places: readonly Place[]) => Promise<void>;
  readonly expectedSteps: readonly string[];
}

/** One owners.mjs run per place; `failOn` names the steps of that place that fail with EIO. */
function runsOf(
  places: readonly Place[],
  failOn: (places: ReturnType<typeof handPlaces>) => MutationStep[] = () => [],
) {
  return places.map(({ place, root }) => ({
    workspace: root,
    stateHome: place.stateHome,
    endpoint: CHILD_ENDPOINT,
    failOn: failOn(handPlaces(place.stateHome, root)),
  }));
}

const CASES: readonly DeadOwnerCase[] = [
  {
    name: 'an owner killed while idle (recovery takes a fresh registry lock)',
    kill: async (places) => {
      const reports = await runBatch(
        'owners.mjs',
        { operation: 'acquire', config: OWNER_CONFIG, runs: runsOf(places), end: 'kill' },
        'kill',
      );
      for (const report of reports) expect(report.failed).toBeNull();
    },
    expectedSteps: [
      ...journalRecorded,
      ...serviceEffects,
      ...lockCreateSteps(`${REGISTRY}/registry.lock`),
      ...rowAndCheckout,
    ],
  },
  {
    name: 'an owner whose release failed in its transaction and could not remove its lock, then exited (recovery takes the lock over)',
    kill: async (places) => {
      // The row's removal fails (EIO at its rename), and so does the lock's removal after it (docs/ownership.md, "The registry transaction", step 5).
      const failOn = (at: ReturnType<typeof handPlaces>): MutationStep[] => [
        { operation: 'replace', action: 'rename', path: at.roots },
        { operation: 'remove', action: 'unlink', path: at.registryLock },
      ];
      const reports = await runBatch('owners.mjs', {
        operation: 'release',
        config: OWNER_CONFIG,
        runs: runsOf(places, failOn),
        end: 'exit',
      });
      for (const report of reports)
        expect(report).toMatchObject({ failed: 'EIO', step: { operation: 'replace', action: 'rename' } });
    },
    expectedSteps: [...journalRecorded, ...lockTakenOver, ...rowAndCheckout],
  },
  {
    name: "an owner whose acquire failed in the registry's initialisation and could not remove its lock, then exited (recovery's transaction completes it)",
    kill: async (places) => {
      // format.json published, roots.json not (EIO at its link), and the lock's removal fails too.
      const failOn = (at: ReturnType<typeof handPlaces>): MutationStep[] => [
        { operation: 'create', action: 'link', path: at.roots },
        { operation: 'remove', action: 'unlink', path: at.registryLock },
      ];
      const reports = await runBatch('owners.mjs', {
        operation: 'acquire',
        config: OWNER_CONFIG,
        runs: runsOf(places, failOn),
        end: 'exit',
      });
      for (const report of reports)
        expect(report).toMatchObject({ failed: 'EIO', step: { operation: 'create', action: 'link' } });
    },
    expectedSteps: [
      ...journalRecorded,
      ...lockTakenOver,
      ...createSteps(`${REGISTRY}/roots.json`),
      ...lockRemoveSteps(`${REGISTRY}/registry.lock`),
    ],
  },
];

/** A step as shown, with a take-over marker's token hidden. */
function stepOf(message: Record<string, unknown>, place: TestPlace, root: string): string {
  return shownStep(message, place, root).replace(/takeover-[0-9a-f-]{36}\.lock/, 'takeover-<token>.lock');
}

/** A fresh place where the case left a dead owner, and the digest of the snapshot the parent took of it. */
async function deadOwnerPlace(deadOwnerCase: DeadOwnerCase): Promise<Place & { digest: string }> {
  const place = makePlace('recovery');
  const root = makeWorkspace(place, 'workspace');
  await deadOwnerCase.kill([{ place, root }]);
  const snapshot = viewOf(place, root);
  expect(snapshot.clear).toBe(false);
  for (const { verdict } of snapshot.holders) expect(verdict).toBe('absent');
  // The registry lock is not a fence: only this workspace's files and row are.
  expect(snapshot.fences.map((fence) => fence.path)).not.toContain(handPlaces(place.stateHome, root).registryLock);
  return { place, root, digest: snapshot.digest };
}

/** A step list as the log shows it, numbered. */
const numbered = (steps: readonly string[]) => steps.map((step, index) => `  ${index + 1}. ${step}`).join('\n');

/** The dry run: the whole recovery in a child, every step reported and checked against the expected list. */
async function dryRun(deadOwnerCase: DeadOwnerCase): Promise<void> {
  const dry = await deadOwnerPlace(deadOwnerCase);
  const child = spawnPlanned(FIXTURES, 'recoverer.mjs', {
    workspace: dry.root,
    stateHome: dry.place.stateHome,
    digest: dry.digest,
  } satisfies RecovererPlan);
  const done = await messageOf(child, 'done');
  expect(await child.closed).toMatchObject({ code: 0, signal: null });
  expect(done.outcome).toMatchObject({ recovered: true });
  const steps = messagesOf(child, 'step').map((message) => stepOf(message, dry.place, dry.root));
  console.log(`recovery of ${deadOwnerCase.name}: ${steps.length} steps\n${numbered(steps)}`);
  expect(steps).toEqual(deadOwnerCase.expectedSteps);
  expect(done.steps).toBe(steps.length);
  expect(serviceFences(dry.place.stateHome, dry.root)).toEqual([]);
  expect(['absent', 'stopped']).toContain(inspectWorkspace(coordinationOf(dry.place, dry.root)).status);
}

/** A recovery child killed before step `at`; the steps it reported are the expected list's up to there. */
async function recoveryKilled(
  deadOwnerCase: DeadOwnerCase,
  { place, root, digest }: Place & { digest: string },
  at: number,
  label: string,
): Promise<void> {
  const child = spawnPlanned(FIXTURES, 'recoverer.mjs', {
    workspace: root,
    stateHome: place.stateHome,
    digest,
    killAt: at,
  } satisfies RecovererPlan);
  const end = await child.closed;
  expect(end, `${label}: ${end.stderr}`).toMatchObject({ code: null, signal: 'SIGKILL' });
  expect(
    messagesOf(child, 'step').map((message) => stepOf(message, place, root)),
    label,
  ).toEqual(deadOwnerCase.expectedSteps.slice(0, at));
}

/** A recovery failing with EIO at step `at`, run by a recoverer process that then exits; answers what that recovery failed with. */
async function recoveryFailed(
  deadOwnerCase: DeadOwnerCase,
  { place, root, digest }: Place & { digest: string },
  at: number,
  label: string,
): Promise<string> {
  const [report] = await runBatch('recoverer.mjs', {
    runs: [{ workspace: root, stateHome: place.stateHome, digest, failAt: at }],
  });
  expect(report!.step === null ? null : stepOf({ step: report!.step }, place, root), label).toBe(
    deadOwnerCase.expectedSteps[at - 1],
  );
  return String(report!.failed);
}

/** What one crash point of a recovery showed, for the record. */
interface PointResult {
  readonly asLeft: string;
  readonly lockAside?: string;
  readonly second: 'recovered' | 'clear';
  /** What the failing first recovery answered (EIO points only). */
  readonly first?: string;
}

/** With the dead recovery's registry lock set aside (a rename keeps its inode): judged, then put back exclusively. */
async function judgedWithLockAside({ place, root }: Place, label: string): Promise<string> {
  const files = handPlaces(place.stateHome, root);
  const aside = join(place.base, 'registry.lock');
  renameSync(files.registryLock, aside);
  const inspected = await judgeFenced(place, root, `${label}, registry lock set aside`);
  linkSync(aside, files.registryLock);
  unlinkSync(aside);
  return inspected;
}

/** A second recovery, with a new snapshot's digest, finishes what the dead one left (taking over a lock left behind). */
async function secondRecovery({ place, root }: Place, label: string): Promise<'recovered' | 'clear'> {
  const snapshot = viewOf(place, root);
  for (const { holder, verdict } of snapshot.holders) expect(verdict, `${label}: holder ${holder.pid}`).toBe('absent');
  const recordsBefore = journalRecords(place.stateHome).length;
  const outcome = await recoverWith(place, root, snapshot.digest).catch((error: unknown) => {
    throw new Error(`${label}: the second recovery failed (${String(error)})`, { cause: error });
  });
  if (snapshot.clear) {
    expect(outcome, label).toEqual({ recovered: false, reason: 'clear' });
  } else {
    expect(outcome, label).toMatchObject({ recovered: true });
    expect(journalRecords(place.stateHome), label).toHaveLength(recordsBefore + 1);
  }
  return snapshot.clear ? 'clear' : 'recovered';
}

/** What a dead recovery left: judged as left (and with its lock set aside), recovered by a second one, then free to acquire. */
async function judgeAndFinish(left: Place, label: string): Promise<Omit<PointResult, 'first'>> {
  const { place, root } = left;
  const files = handPlaces(place.stateHome, root);
  const asLeft = await judgeFenced(place, root, label);
  const markers = namesIn(join(place.stateHome, 'v1', 'registry')).filter((name) => name.startsWith('takeover-'));
  const lockAside =
    pathExists(files.registryLock) && markers.length === 0 ? await judgedWithLockAside(left, label) : undefined;
  const second = await secondRecovery(left, label);
  expect(serviceFences(place.stateHome, root), label).toEqual([]);
  expect(pathExists(files.checkoutLock), label).toBe(false);
  const coordination = coordinationOf(place, root);
  expect(['absent', 'stopped'], label).toContain(inspectWorkspace(coordination).status);
  const lease = await acquireWorkspace(coordination, OWNER_CONFIG, PARENT_ENDPOINT);
  await lease.release();
  expect(inspectWorkspace(coordination).status, label).toBe('stopped');
  expect(namesIn(join(place.stateHome, 'v1', 'registry')), label).toEqual(['format.json', 'roots.json']);
  return { asLeft, ...(lockAside === undefined ? {} : { lockAside }), second };
}

/** Counts of the crash points of recovery itself in this file, for the closing log (bookkeeping only). */
const recoveryCrashPoints = { killed: 0, failing: 0 };

/** Logs what the crash points of one case's recovery showed. */
function logOutcomes(name: string, kind: 'killed' | 'failing', results: readonly PointResult[]) {
  recoveryCrashPoints[kind] += results.length;
  console.log(`${name}: recovered ${results.length} crash points of recovery itself (${kind})`, {
    ...(kind === 'failing'
      ? { 'the first recovery answered': countsOf(results.map((result) => result.first ?? '')) }
      : {}),
    'inspect as left': countsOf(results.map((result) => result.asLeft)),
    'inspect with the lock set aside': countsOf(
      results.flatMap((result) => (result.lockAside === undefined ? [] : [result.lockAside])),
    ),
    'second recovery': countsOf(results.map((result) => result.second)),
  });
}

afterAll(() =>
  console.log(
    `crash points of recovery itself: ${recoveryCrashPoints.killed} killed, ${recoveryCrashPoints.failing} failing with EIO`,
  ),
);

// One test per crash point of the recovery (each a fresh place with its own dead owner, and its own recovery child),
// so that each stays far inside its bound; the dry run, which proves the step list every point's title and checks
// rely on, is a test of its own.
for (const deadOwnerCase of CASES)
  describe(`recovery from every crash point of a recovery leaves it fenced: ${deadOwnerCase.name}`, () => {
    const results = { killed: [] as PointResult[], failing: [] as PointResult[] };
    afterAll(() => {
      logOutcomes(deadOwnerCase.name, 'killed', results.killed);
      logOutcomes(deadOwnerCase.name, 'failing', results.failing);
    });

    it('the dry run reports exactly the steps written from docs/ownership.md', () => dryRun(deadOwnerCase));

    for (const [index, step] of deadOwnerCase.expectedSteps.entries()) {
      const at = index + 1;
      const name = `recovery killed before step ${at}: ${step}`;
      it(name, async () => {
        const left = await deadOwnerPlace(deadOwnerCase);
        await recoveryKilled(deadOwnerCase, left, at, `${deadOwnerCase.name}, ${name}`);
        results.killed.push(await judgeAndFinish(left, `${deadOwnerCase.name}, ${name}`));
      });
    }

    for (const [index, step] of deadOwnerCase.expectedSteps.entries()) {
      const at = index + 1;
      const name = `recovery failing with EIO at step ${at}: ${step}`;
      it(`${name}, then the process exits`, async () => {
        const left = await deadOwnerPlace(deadOwnerCase);
        const first = await recoveryFailed(deadOwnerCase, left, at, `${deadOwnerCase.name}, ${name}`);
        results.failing.push({ first, ...(await judgeAndFinish(left, `${deadOwnerCase.name}, ${name}`)) });
      });
    }
  });
