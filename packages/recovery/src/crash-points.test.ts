import { unlinkSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServiceCoordination } from '@leasehold/coordination';
import {
  cleanUp,
  countsOf,
  endpointOf,
  handPlaces,
  killAndReap,
  makeWorkspace,
  messageOf,
  messagesOf,
  pathExists,
  serviceFences,
  shownStep,
} from '@leasehold/test-utils';
import {
  OWNER_CONFIG,
  PARENT_ENDPOINT,
  coordinationOf,
  grant,
  journalRecords,
  makePlace,
  ownerPlan,
  spawnFixture,
  type OwnerPlan,
  type TestPlace,
} from '../test/helpers.js';
import { recover, recoverySnapshot } from './index.js';

afterEach(cleanUp);

// SPEC 6 and 8.3: an owner killed (SIGKILL) before any single mutating step
// of acquire, a phase change or release, or killed while idle after a
// completed acquire, leaves a state that `recover` brings to `stopped` (or
// finds clear), after which a new `acquire` succeeds.

interface OperationCase {
  readonly name: string;
  readonly operation: OwnerPlan['operation'];
  /** Brings the fresh place to the state the operation starts from (run in this process). */
  readonly prepare?: (coordination: ServiceCoordination) => Promise<void>;
}

const CASES: readonly OperationCase[] = [
  { name: 'acquire of a fresh workspace', operation: 'acquire' },
  {
    name: 'acquire over a stopped registration (acquired and released before)',
    operation: 'acquire',
    prepare: async (coordination) => {
      await (await coordination.acquire(OWNER_CONFIG, endpointOf(45_000))).release();
    },
  },
  { name: "phase change to 'stopping'", operation: 'phase' },
  { name: 'release', operation: 'release' },
];

async function preparedPlace(operationCase: OperationCase): Promise<{ place: TestPlace; root: string; coordination: ServiceCoordination }> {
  const place = makePlace();
  const root = makeWorkspace(place, 'workspace');
  const coordination = coordinationOf(place, root);
  await operationCase.prepare?.(coordination);
  return { place, root, coordination };
}

/** What one crash point showed, for the record. */
interface Outcome {
  readonly inspected: string;
  readonly recovery: 'recovered' | 'clear';
}

/**
 * From the state a dead owner left: while a service fence remains, `inspect`
 * is never `absent` or `stopped`; the snapshot names only absent holders;
 * `recover` with its digest resolves (recovered, or clear when nothing
 * fences); then no fence is left, `inspect` is `absent` or `stopped`, and a
 * new owner acquires and releases.
 */
async function recoverAndReacquire(place: TestPlace, root: string, coordination: ServiceCoordination, label: string): Promise<Outcome> {
  const fences = serviceFences(place.stateHome, root);
  const inspected = coordination.inspect().status;
  if (fences.length > 0) expect(['absent', 'stopped'], `${label}: fences ${fences.join(', ')}`).not.toContain(inspected);

  const snapshot = recoverySnapshot(coordination);
  if (!snapshot.clear) {
    for (const { holder, status } of snapshot.holders) expect(status, `${label}: holder ${holder.pid}`).toBe('absent');
  } else {
    // Clear: nothing remains but the service format, config and a stopped registration, which name no holder.
    const kept = snapshot.fences.map((fence) => (fence.kind === 'registration' ? `registration:${fence.phase ?? ''}` : fence.kind));
    for (const kind of kept) expect(['service-format', 'service-config', 'registration:stopped'], label).toContain(kind);
    expect(snapshot.holders, label).toEqual([]);
  }
  const outcome = await recover(coordination, { expectedDigest: snapshot.digest, assertAuthority: grant }).catch((error: unknown) => {
    throw new Error(`${label}: recover failed (${String(error)}); fences ${JSON.stringify(snapshot.fences.map((fence) => fence.kind))}`, { cause: error });
  });
  if (snapshot.clear) {
    expect(outcome, label).toEqual({ recovered: false, reason: 'clear' });
    expect(journalRecords(place.stateHome), `${label}: a clear state needs no record`).toEqual([]);
  } else {
    expect(outcome, label).toMatchObject({ recovered: true });
    expect(journalRecords(place.stateHome), label).toHaveLength(1);
  }

  expect(serviceFences(place.stateHome, root), label).toEqual([]);
  expect(pathExists(handPlaces(place.stateHome, root).checkoutLock), `${label}: the dead owner's checkout lock`).toBe(false);
  const after = coordination.inspect();
  expect(['absent', 'stopped'], `${label}: ${JSON.stringify(after)}`).toContain(after.status);

  const lease = await coordination.acquire(OWNER_CONFIG, PARENT_ENDPOINT);
  expect(coordination.inspect(), label).toMatchObject({ status: 'unavailable', owner: { pid: process.pid, endpoint: PARENT_ENDPOINT, phase: 'idle' } });
  await lease.release();
  expect(coordination.inspect().status, label).toBe('stopped');
  return { inspected, recovery: snapshot.clear ? 'clear' : 'recovered' };
}

let recoveredCrashPoints = 0;

describe('recovery from every crash point of an owner (SPEC 8.3)', () => {
  for (const operationCase of CASES) {
    it(operationCase.name, async () => {
      // The dry run: the whole operation in a child, every step reported.
      const dry = await preparedPlace(operationCase);
      const dryRun = spawnFixture('owner.mjs', ownerPlan(dry.place, dry.root, operationCase.operation));
      const done = await messageOf(dryRun, 'done');
      expect(await dryRun.closed).toMatchObject({ code: 0, signal: null });
      const steps = messagesOf(dryRun, 'step').map((message) => shownStep(message, dry.place, dry.root));
      expect(done.steps).toBe(steps.length);
      expect(steps.length).toBeGreaterThan(0);
      console.log(`${operationCase.name}: ${steps.length} steps\n${steps.map((step, index) => `  ${index + 1}. ${step}`).join('\n')}`);

      // Killed before step k, for every k, then once after the operation returned (a kill -9 of the owner).
      const crashPoints: (number | 'end')[] = [...Array.from({ length: steps.length }, (_, index) => index + 1), 'end'];
      const outcomes: Outcome[] = [];
      const withoutLock: Outcome[] = [];
      /** A fresh place where the owner was killed before step `killAt`. */
      const crashed = async (killAt: number | 'end') => {
        const prepared = await preparedPlace(operationCase);
        const child = spawnFixture('owner.mjs', ownerPlan(prepared.place, prepared.root, operationCase.operation, killAt));
        const end = await child.closed;
        expect(end, `killed at ${killAt}: ${end.stderr}`).toMatchObject({ code: null, signal: 'SIGKILL' });
        const reported = messagesOf(child, 'step').map((message) => (message.step as { n: number }).n);
        expect(reported.at(-1)).toBe(killAt === 'end' ? steps.length : killAt);
        return prepared;
      };
      for (const killAt of crashPoints) {
        const label = `${operationCase.name}, killed before ${killAt === 'end' ? 'nothing (after the last step)' : `step ${killAt}: ${steps[killAt - 1]}`}`;
        const { place, root, coordination } = await crashed(killAt);
        const hadLock = pathExists(handPlaces(place.stateHome, root).registryLock);
        outcomes.push(await recoverAndReacquire(place, root, coordination, label));
        await cleanUp();
        if (hadLock) {
          // SPEC 8.3: the same once the dead writer's registry lock is deleted by hand (recovery then takes a fresh one).
          const again = await crashed(killAt);
          unlinkSync(handPlaces(again.place.stateHome, again.root).registryLock);
          withoutLock.push(await recoverAndReacquire(again.place, again.root, again.coordination, `${label}, registry lock deleted by hand`));
          await cleanUp();
        }
      }
      recoveredCrashPoints += crashPoints.length;
      console.log(`${operationCase.name}: recovered ${crashPoints.length} crash points (and ${withoutLock.length} with the registry lock deleted by hand)`, {
        'inspect before recovery': countsOf(outcomes.map((outcome) => outcome.inspected)),
        recovery: countsOf(outcomes.map((outcome) => outcome.recovery)),
        'lock deleted: inspect before recovery': countsOf(withoutLock.map((outcome) => outcome.inspected)),
        'lock deleted: recovery': countsOf(withoutLock.map((outcome) => outcome.recovery)),
      });
    });
  }

  it('a running owner killed with kill -9 while idle', async () => {
    const place = makePlace();
    const root = makeWorkspace(place, 'workspace');
    const coordination = coordinationOf(place, root);
    const owner = spawnFixture('owner.mjs', ownerPlan(place, root, 'acquire', 'hold'));
    await messageOf(owner, 'held');
    expect(coordination.inspect()).toMatchObject({ status: 'unavailable', owner: { pid: owner.pid, phase: 'idle' } });
    expect(await killAndReap(owner)).toMatchObject({ code: null, signal: 'SIGKILL' });

    const snapshot = recoverySnapshot(coordination);
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
    expect(await recoverAndReacquire(place, root, coordination, 'kill -9 while idle')).toEqual({ inspected: 'unavailable', recovery: 'recovered' });
    recoveredCrashPoints += 1;
    console.log(`recovered ${recoveredCrashPoints} crash points of acquire/phase/release`);
  });
});
