import { linkSync, renameSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  countsOf,
  createSteps,
  handPlaces,
  lockCreateSteps,
  lockRemoveSteps,
  makeWorkspace,
  messageOf,
  messagesOf,
  namesIn,
  pathExists,
  releaseServiceSteps,
  removeSteps,
  replaceSteps,
  serviceFences,
  shownStep,
} from '@leasehold/test-utils';
import type { MutationStep } from '@leasehold/private-files';
import {
  CHILD_ENDPOINT,
  OWNER_CONFIG,
  PARENT_ENDPOINT,
  coordinationOf,
  inTurns,
  journalRecords,
  judgeFenced,
  makePlace,
  recoverWith,
  runBatch,
  snapshotOf,
  spawnFixture,
  type RecovererPlan,
  type TestPlace,
} from '../test/helpers.js';

afterEach(cleanUp);

// SPEC 10.3 for recovery itself: a recovery killed (SIGKILL) before any
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

/** The journal record first (SPEC 6: written before the first effect). */
const journalRecorded = ['directory mkdir state/v1/journal', 'directory fsync-directory state/v1', ...createSteps('state/v1/journal/<record>')];
/** The effects on the service folder, in release order (one folder fsync for the three). */
const serviceEffects = releaseServiceSteps(SERVICE);
/** A dead holder's registry lock taken over: the marker (exclusive), the lock replaced, the marker swept. */
const lockTakenOver = [...createSteps(MARKER), ...replaceSteps(`${REGISTRY}/registry.lock`), ...removeSteps(MARKER)];
/** In the transaction: the row, then the checkout lock; then its lock removed. */
const rowAndCheckout = [...replaceSteps(`${REGISTRY}/roots.json`), ...removeSteps(`${WORKSPACE}/checkout.lock`), ...lockRemoveSteps(`${REGISTRY}/registry.lock`)];

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
function runsOf(places: readonly Place[], failOn: (places: ReturnType<typeof handPlaces>) => MutationStep[] = () => []) {
  return places.map(({ place, root }) => ({ workspace: root, stateHome: place.stateHome, endpoint: CHILD_ENDPOINT, failOn: failOn(handPlaces(place.stateHome, root)) }));
}

const CASES: readonly DeadOwnerCase[] = [
  {
    name: 'an owner killed while idle (recovery takes a fresh registry lock)',
    kill: async (places) => {
      const reports = await runBatch('owners.mjs', { operation: 'acquire', config: OWNER_CONFIG, runs: runsOf(places), end: 'kill' }, 'kill');
      for (const report of reports) expect(report.failed).toBeNull();
    },
    expectedSteps: [...journalRecorded, ...serviceEffects, ...lockCreateSteps(`${REGISTRY}/registry.lock`), ...rowAndCheckout],
  },
  {
    name: 'an owner whose release failed in its transaction and could not remove its lock, then exited (recovery takes the lock over)',
    kill: async (places) => {
      // The row's removal fails (EIO at its rename), and so does the lock's removal after it (SPEC 4.5).
      const failOn = (at: ReturnType<typeof handPlaces>): MutationStep[] => [
        { operation: 'replace', action: 'rename', path: at.roots },
        { operation: 'remove', action: 'unlink', path: at.registryLock },
      ];
      const reports = await runBatch('owners.mjs', { operation: 'release', config: OWNER_CONFIG, runs: runsOf(places, failOn), end: 'exit' });
      for (const report of reports) expect(report).toMatchObject({ failed: 'EIO', step: { operation: 'replace', action: 'rename' } });
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
      const reports = await runBatch('owners.mjs', { operation: 'acquire', config: OWNER_CONFIG, runs: runsOf(places, failOn), end: 'exit' });
      for (const report of reports) expect(report).toMatchObject({ failed: 'EIO', step: { operation: 'create', action: 'link' } });
    },
    expectedSteps: [...journalRecorded, ...lockTakenOver, ...createSteps(`${REGISTRY}/roots.json`), ...lockRemoveSteps(`${REGISTRY}/registry.lock`)],
  },
];

/** A step as shown, with a take-over marker's token hidden. */
function stepOf(message: Record<string, unknown>, place: TestPlace, root: string): string {
  return shownStep(message, place, root).replace(/takeover-[0-9a-f-]{36}\.lock/, 'takeover-<token>.lock');
}

let recoveryCrashPoints = { killed: 0, failing: 0 };

describe('recovery from every crash point of a recovery (SPEC 10.3)', () => {
  for (const deadOwnerCase of CASES) {
    /** `count` fresh places with a dead owner each, and the digest of the snapshot the parent took of each. */
    const setUp = async (count: number): Promise<(Place & { digest: string })[]> => {
      const places: Place[] = Array.from({ length: count }, () => {
        const place = makePlace();
        return { place, root: makeWorkspace(place, 'workspace') };
      });
      await deadOwnerCase.kill(places);
      return places.map(({ place, root }) => {
        const snapshot = snapshotOf(place, root);
        expect(snapshot.clear).toBe(false);
        for (const { status } of snapshot.holders) expect(status).toBe('absent');
        // The registry lock is not a fence: only this workspace's files and row are.
        expect(snapshot.fences.map((fence) => fence.path)).not.toContain(handPlaces(place.stateHome, root).registryLock);
        return { place, root, digest: snapshot.digest };
      });
    };

    /** The dry run: the whole recovery in a child, every step reported and checked. */
    const dryRun = async (): Promise<string[]> => {
      const [dry] = await setUp(1);
      const plan: RecovererPlan = { workspace: dry!.root, stateHome: dry!.place.stateHome, digest: dry!.digest };
      const child = spawnFixture('recoverer.mjs', plan);
      const done = await messageOf(child, 'done');
      expect(await child.closed).toMatchObject({ code: 0, signal: null });
      expect(done.outcome).toMatchObject({ recovered: true });
      const steps = messagesOf(child, 'step').map((message) => stepOf(message, dry!.place, dry!.root));
      console.log(`recovery of ${deadOwnerCase.name}: ${steps.length} steps\n${steps.map((step, index) => `  ${index + 1}. ${step}`).join('\n')}`);
      expect(steps).toEqual(deadOwnerCase.expectedSteps);
      expect(done.steps).toBe(steps.length);
      expect(serviceFences(dry!.place.stateHome, dry!.root)).toEqual([]);
      expect(['absent', 'stopped']).toContain(coordinationOf(dry!.place, dry!.root).inspect().status);
      await cleanUp();
      return steps;
    };

    for (const kind of ['killed', 'failing'] as const) {
      const title = kind === 'killed' ? 'killed before each step' : 'an I/O error at each step, then the process exits';
      it(`${deadOwnerCase.name}: recovery ${title}`, async () => {
        const steps = await dryRun();
        const asLeft: string[] = [];
        const lockAside: string[] = [];
        const first: string[] = [];
        const second: string[] = [];
        const points = steps.map((_, index) => index + 1);
        const places = await setUp(points.length);
        const labelOf = (at: number) => `${deadOwnerCase.name}, recovery ${kind === 'killed' ? 'killed before' : 'failing with EIO at'} step ${at}: ${steps[at - 1]}`;
        if (kind === 'failing') {
          // One recoverer process runs every failing recovery, one place each, then exits.
          const runs = places.map(({ place, root, digest }, index) => ({ workspace: root, stateHome: place.stateHome, digest, failAt: points[index]! }));
          const reports = await runBatch('recoverer.mjs', { runs });
          for (const [index, report] of reports.entries()) {
            const { place, root } = places[index]!;
            expect(report.step === null ? null : stepOf({ step: report.step }, place, root), labelOf(points[index]!)).toBe(steps[index]);
            first.push(String(report.failed));
          }
        }
        // Two places at a time: a recoverer child starting for one overlaps this process's work on another.
        await inTurns(places, 2, async ({ place, root, digest }, index) => {
          const at = points[index]!;
          const label = labelOf(at);
          const files = handPlaces(place.stateHome, root);
          if (kind === 'killed') {
            const child = spawnFixture('recoverer.mjs', { workspace: root, stateHome: place.stateHome, digest, killAt: at } satisfies RecovererPlan);
            const end = await child.closed;
            expect(end, `${label}: ${end.stderr}`).toMatchObject({ code: null, signal: 'SIGKILL' });
            expect(messagesOf(child, 'step').map((message) => (message.step as { n: number }).n).at(-1), label).toBe(at);
          }

          asLeft.push(await judgeFenced(place, root, label));
          const markers = namesIn(join(place.stateHome, 'v1', 'registry')).filter((name) => name.startsWith('takeover-'));
          if (pathExists(files.registryLock) && markers.length === 0) {
            // Set the dead recovery's lock aside (a rename keeps its inode), judge, and put it back exclusively.
            const aside = join(place.scratch, 'registry.lock');
            renameSync(files.registryLock, aside);
            lockAside.push(await judgeFenced(place, root, `${label}, registry lock set aside`));
            linkSync(aside, files.registryLock);
            unlinkSync(aside);
          }

          // A second recovery, with a new snapshot's digest, finishes it (taking over a lock left behind).
          const snapshot = snapshotOf(place, root);
          for (const { holder, status } of snapshot.holders) expect(status, `${label}: holder ${holder.pid}`).toBe('absent');
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
          second.push(snapshot.clear ? 'clear' : 'recovered');
          expect(serviceFences(place.stateHome, root), label).toEqual([]);
          expect(pathExists(files.checkoutLock), label).toBe(false);
          const coordination = coordinationOf(place, root);
          expect(['absent', 'stopped'], label).toContain(coordination.inspect().status);
          const lease = await coordination.acquire(OWNER_CONFIG, PARENT_ENDPOINT);
          await lease.release();
          expect(coordination.inspect().status, label).toBe('stopped');
          expect(namesIn(join(place.stateHome, 'v1', 'registry')), label).toEqual(['format.json', 'roots.json']);
        });
        await cleanUp();
        recoveryCrashPoints = { ...recoveryCrashPoints, [kind]: recoveryCrashPoints[kind] + steps.length };
        console.log(`crash points of recovery itself so far: ${recoveryCrashPoints.killed} killed, ${recoveryCrashPoints.failing} failing with EIO`);
        console.log(`${deadOwnerCase.name}: recovered ${steps.length} crash points of recovery itself (${kind})`, {
          ...(kind === 'failing' ? { 'the first recovery answered': countsOf(first) } : {}),
          'inspect as left': countsOf(asLeft),
          'inspect with the lock set aside': countsOf(lockAside),
          'second recovery': countsOf(second),
        });
      });
    }
  }
});
