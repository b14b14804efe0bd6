import { linkSync, renameSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServiceCoordination } from '@leasehold/coordination';
import {
  cleanUp,
  codeOfAsync,
  countsOf,
  createSteps,
  handPlaces,
  jsonOf,
  listingOutsideStaging,
  makeWorkspace,
  messageOf,
  messagesOf,
  pathExists,
  removeSteps,
  replaceSteps,
  serviceFences,
  shownStep,
} from '@leasehold/test-utils';
import {
  OWNER_CONFIG,
  PARENT_ENDPOINT,
  coordinationOf,
  deadOwner,
  grant,
  journalRecords,
  makePlace,
  ownerPlan,
  rowsOf,
  spawnFixture,
  type RecovererPlan,
  type TestPlace,
} from '../test/helpers.js';
import { recover, recoverySnapshot } from './index.js';

afterEach(cleanUp);

// SPEC 6 and 8.3: a recovery killed (SIGKILL) before any single mutating step
// of its own leaves a state where `inspect` never answers `absent` or
// `stopped` while a service fence remains, where a new `acquire` is refused,
// and which a second recovery (with a new snapshot's digest) brings to
// `stopped`, after which `acquire` succeeds. The same `inspect` and `acquire`
// rule holds while the dead recovery's registry lock is set aside by hand,
// which makes the order of its effects visible.

const REGISTRY = 'state/v1/registry';
const WORKSPACE = 'state/v1/workspaces/<ws>';
const SERVICE = `${WORKSPACE}/service`;

/** The journal record first (SPEC 6: written before the first effect). */
const journalRecorded = ['directory mkdir state/v1/journal', 'directory fsync-directory state/v1', ...createSteps('state/v1/journal/<record>')];
/** Then the effects in release order, and the registry lock last. */
const effects = [
  ...replaceSteps(`${SERVICE}/registration.json`),
  ...replaceSteps(`${REGISTRY}/roots.json`),
  ...removeSteps(`${SERVICE}/local-capability.json`),
  ...removeSteps(`${SERVICE}/owner.lock`),
  ...removeSteps(`${WORKSPACE}/checkout.lock`),
  ...removeSteps(`${REGISTRY}/registry.lock`),
];

interface DeadOwnerCase {
  readonly name: string;
  /** Leaves a dead owner of `root`. */
  readonly kill: (place: TestPlace, root: string) => Promise<void>;
  readonly expectedSteps: readonly string[];
}

const CASES: readonly DeadOwnerCase[] = [
  {
    name: 'an owner killed while idle (recovery takes a fresh registry lock)',
    kill: async (place, root) => {
      await deadOwner(place, root);
    },
    expectedSteps: [...journalRecorded, ...createSteps(`${REGISTRY}/registry.lock`), ...effects],
  },
  {
    name: 'an owner killed inside release, holding the registry lock (recovery takes it over)',
    kill: async (place, root) => {
      // Release steps 1-5 publish the registry lock; killed before step 6, the registration's write.
      const child = spawnFixture('owner.mjs', ownerPlan(place, root, 'release', 6));
      const end = await child.closed;
      if (end.signal !== 'SIGKILL') throw new Error(`the owner ended with ${end.code ?? end.signal}: ${end.stderr}`);
    },
    expectedSteps: [...journalRecorded, ...replaceSteps(`${REGISTRY}/registry.lock`), ...effects],
  },
];

/** The code a new `acquire` must answer in this state, worked out by hand from SPEC 4 and 5.2-5.3. */
function expectedAcquireCode(place: TestPlace, root: string): string {
  const places = handPlaces(place.stateHome, root);
  if (pathExists(places.registryLock)) return 'quarantine'; // a dead writer's lock: a fence
  if (rowsOf(place.stateHome).some((row) => row.root === root)) return 'conflict'; // a row for this root
  const registration = jsonOf(places.registration) as { phase: string; checkoutToken: string } | undefined;
  if (registration !== undefined && registration.phase !== 'stopped') return 'quarantine';
  if (pathExists(places.ownerLock) || pathExists(places.capability)) return 'refused'; // SPEC 5.2 rule 5
  const checkout = jsonOf(places.checkoutLock) as { token: string } | undefined;
  if (checkout !== undefined) return checkout.token === registration?.checkoutToken ? 'refused' : 'conflict';
  return 'no error';
}

/**
 * SPEC 8.3 on a state left by a dead writer: `inspect` is never `absent` or
 * `stopped` while a service fence remains, and while one (or the dead
 * owner's checkout lock) remains a new `acquire` is refused with the code the
 * state calls for, changing nothing.
 * Returns what `inspect` answered.
 */
async function judgeFenced(place: TestPlace, root: string, coordination: ServiceCoordination, label: string): Promise<string> {
  const fences = serviceFences(place.stateHome, root);
  const inspected = coordination.inspect().status;
  if (fences.length === 0) {
    // No service fence, but the dead owner's checkout lock under its stopped registration: not a clean state.
    if (pathExists(handPlaces(place.stateHome, root).checkoutLock)) expect(inspected, label).toBe('unavailable');
    else return inspected;
  }
  expect(['absent', 'stopped'], `${label}: fences ${fences.join(', ')}`).not.toContain(inspected);
  const before = listingOutsideStaging(place.stateHome);
  const code = await codeOfAsync(coordination.acquire(OWNER_CONFIG, PARENT_ENDPOINT));
  expect(code, `${label}: acquire with fences ${fences.join(', ')}`).toBe(expectedAcquireCode(place, root));
  expect(listingOutsideStaging(place.stateHome), `${label}: the refused acquire changed the state`).toEqual(before);
  return inspected;
}

let recoveryCrashPoints = 0;

describe('recovery from every crash point of a recovery (SPEC 8.3)', () => {
  for (const deadOwnerCase of CASES) {
    it(deadOwnerCase.name, async () => {
      /** A fresh place with a dead owner, the snapshot the parent took, and the plan of a recoverer child. */
      const setUp = async (killAt?: number) => {
        const place = makePlace();
        const root = makeWorkspace(place, 'workspace');
        const coordination = coordinationOf(place, root);
        await deadOwnerCase.kill(place, root);
        const snapshot = recoverySnapshot(coordination);
        expect(snapshot.clear).toBe(false);
        for (const { status } of snapshot.holders) expect(status).toBe('absent');
        const plan: RecovererPlan = {
          workspace: root,
          stateHome: place.stateHome,
          scratch: place.scratch,
          digest: snapshot.digest,
          ...(killAt === undefined ? {} : { killAt }),
        };
        return { place, root, coordination, snapshot, plan };
      };

      // The dry run: the whole recovery in a child, every step reported.
      const dry = await setUp();
      const dryRun = spawnFixture('recoverer.mjs', dry.plan);
      const done = await messageOf(dryRun, 'done');
      expect(await dryRun.closed).toMatchObject({ code: 0, signal: null });
      expect(done.outcome).toMatchObject({ recovered: true });
      const steps = messagesOf(dryRun, 'step').map((message) => shownStep(message, dry.place, dry.root));
      console.log(`recovery of ${deadOwnerCase.name}: ${steps.length} steps\n${steps.map((step, index) => `  ${index + 1}. ${step}`).join('\n')}`);
      expect(steps).toEqual(deadOwnerCase.expectedSteps);
      expect(done.steps).toBe(steps.length);
      expect(dry.coordination.inspect().status).toBe('stopped');
      await cleanUp();

      const asLeft: string[] = [];
      const lockAside: string[] = [];
      const second: string[] = [];
      for (let killAt = 1; killAt <= steps.length; killAt += 1) {
        const label = `${deadOwnerCase.name}, recovery killed before step ${killAt}: ${steps[killAt - 1]}`;
        const { place, root, coordination, plan } = await setUp(killAt);
        const places = handPlaces(place.stateHome, root);
        const child = spawnFixture('recoverer.mjs', plan);
        const end = await child.closed;
        expect(end, `${label}: ${end.stderr}`).toMatchObject({ code: null, signal: 'SIGKILL' });
        expect(messagesOf(child, 'step').map((message) => (message.step as { n: number }).n).at(-1), label).toBe(killAt);

        asLeft.push(await judgeFenced(place, root, coordination, label));
        if (pathExists(places.registryLock)) {
          // Set the dead recovery's lock aside (a rename keeps its inode), judge, and put it back exclusively.
          const aside = join(place.scratch, 'registry.lock');
          renameSync(places.registryLock, aside);
          lockAside.push(await judgeFenced(place, root, coordination, `${label}, registry lock set aside`));
          linkSync(aside, places.registryLock);
          unlinkSync(aside);
        }

        // A second recovery, with a new snapshot's digest, finishes it.
        const snapshot = recoverySnapshot(coordination);
        for (const { holder, status } of snapshot.holders) expect(status, `${label}: holder ${holder.pid}`).toBe('absent');
        const recordsBefore = journalRecords(place.stateHome).length;
        const outcome = await recover(coordination, { expectedDigest: snapshot.digest, assertAuthority: grant }).catch((error: unknown) => {
          throw new Error(`${label}: the second recovery failed (${String(error)})`, { cause: error });
        });
        if (snapshot.clear) {
          // Only when the first recovery died after unlinking its lock, before the folder's fsync.
          expect(killAt, label).toBe(steps.length);
          expect(outcome, label).toEqual({ recovered: false, reason: 'clear' });
        } else {
          expect(outcome, label).toMatchObject({ recovered: true });
          expect(journalRecords(place.stateHome), label).toHaveLength(recordsBefore + 1);
        }
        second.push(snapshot.clear ? 'clear' : 'recovered');
        expect(serviceFences(place.stateHome, root), label).toEqual([]);
        expect(pathExists(places.checkoutLock), label).toBe(false);
        expect(coordination.inspect().status, label).toBe('stopped');
        const lease = await coordination.acquire(OWNER_CONFIG, PARENT_ENDPOINT);
        await lease.release();
        expect(coordination.inspect().status, label).toBe('stopped');
        await cleanUp();
      }
      recoveryCrashPoints += steps.length;
      console.log(`${deadOwnerCase.name}: recovered ${steps.length} crash points of recovery itself`, {
        'inspect as left': countsOf(asLeft),
        'inspect with the lock set aside': countsOf(lockAside),
        'second recovery': countsOf(second),
      });
    });
  }

  it('counts them', () => {
    expect(recoveryCrashPoints).toBe(CASES.reduce((total, deadOwnerCase) => total + deadOwnerCase.expectedSteps.length, 0));
    console.log(`recovered ${recoveryCrashPoints} crash points of recovery itself`);
  });
});
