import { unlinkSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Registry } from '@leasehold/registry';
import { cleanUp, countsOf, endpointOf, handPlaces, makeWorkspace, messageOf, pathExists, type SpawnedChild } from '@leasehold/test-utils';
import { OWNER_CONFIG, makePlace, spawnFixture, stagingLeftovers, type TestPlace } from '../test/process-helpers.js';
import { ServiceCoordination } from './index.js';

afterEach(cleanUp);

const RACERS = 16;

/** The plan of `test/process-fixtures/racer.mjs`. */
interface RacerPlan {
  readonly workspace: string;
  readonly stateHome: string;
  readonly config: typeof OWNER_CONFIG;
  readonly endpoint: string;
  readonly then: 'hold' | 'release';
  readonly lockWaitMs?: number;
}

/** Starts the racers, waits until every one is loaded and waiting, then lets them all go at once. */
async function race(plans: readonly RacerPlan[]): Promise<{ racer: SpawnedChild; plan: RacerPlan; outcome: string }[]> {
  const racers = plans.map((plan) => ({ racer: spawnFixture('racer.mjs', plan), plan }));
  await Promise.all(racers.map(({ racer }) => messageOf(racer, 'ready')));
  for (const { racer } of racers) racer.send('go');
  return Promise.all(
    racers.map(async ({ racer, plan }) => ({ racer, plan, outcome: String((await messageOf(racer, 'outcome')).outcome) })),
  );
}

function registryOf(place: TestPlace): Registry {
  return new Registry(place.stateHome);
}

describe('processes racing acquire (SPEC 8.1)', () => {
  it(`${RACERS} processes acquiring one root at once: exactly one wins, the others are refused`, async () => {
    const place = makePlace();
    const root = makeWorkspace(place, 'shared');
    // The default lock wait (2 s): a loser that waits longer answers `busy`, which is a correct refusal too.
    const plans = Array.from({ length: RACERS }, (_, index): RacerPlan => ({
      workspace: root,
      stateHome: place.stateHome,
      config: OWNER_CONFIG,
      endpoint: endpointOf(41_000 + index),
      then: 'hold',
    }));
    const results = await race(plans);
    console.log(`one root, ${RACERS} racers:`, countsOf(results.map((result) => result.outcome)));

    const winners = results.filter((result) => result.outcome === 'won');
    expect(winners).toHaveLength(1);
    const winner = winners[0]!;
    for (const loser of results.filter((result) => result !== winner)) {
      // No writer fails in this race, so no lock is ever left behind: `quarantine` would be a
      // false fence. (It once came from a loser that read another loser's lock, which was then
      // removed by a holder that exited before the liveness check: see Registry#shortHold.)
      expect(['conflict', 'busy'], loser.racer.lines.join('\n')).toContain(loser.outcome);
      expect(await loser.racer.closed).toMatchObject({ code: 0, signal: null });
    }

    // Every loser has exited: the registry is unlocked and holds exactly the winner's row.
    const peek = registryOf(place).peek();
    expect(peek.locked).toBe(false);
    expect(peek.entries).toHaveLength(1);
    expect(peek.entries[0]).toMatchObject({ root, endpoint: winner.plan.endpoint, pid: winner.racer.pid });
    expect(new ServiceCoordination(root, { stateHome: place.stateHome }).inspect()).toMatchObject({
      status: 'unavailable',
      owner: { pid: winner.racer.pid, endpoint: winner.plan.endpoint, phase: 'idle' },
    });

    winner.racer.send('release');
    await messageOf(winner.racer, 'released');
    expect(await winner.racer.closed).toMatchObject({ code: 0, signal: null });
    expect(registryOf(place).peek()).toMatchObject({ entries: [], locked: false });
    expect(new ServiceCoordination(root, { stateHome: place.stateHome }).inspect().status).toBe('stopped');
  });

  it(`${RACERS} processes acquiring ${RACERS} disjoint roots at once: all win, and all release cleanly`, async () => {
    const place = makePlace();
    const plans = Array.from({ length: RACERS }, (_, index): RacerPlan => ({
      workspace: makeWorkspace(place, `disjoint-${index}`),
      stateHome: place.stateHome,
      config: OWNER_CONFIG,
      endpoint: endpointOf(42_000 + index),
      then: 'release',
      // Generous on purpose: 32 transactions queue on one registry lock, and on a
      // slow disk the last one may wait longer than the default 2 s. With this
      // bound the outcome depends on exclusion alone, never on disk speed.
      lockWaitMs: 60_000,
    }));
    const results = await race(plans);
    const outcomes = results.map((result) => result.outcome);
    console.log(`${RACERS} disjoint roots, ${RACERS} racers:`, countsOf(outcomes));

    expect(outcomes).toEqual(Array.from({ length: RACERS }, () => 'won'));
    for (const { racer } of results) {
      await messageOf(racer, 'released');
      expect(await racer.closed).toMatchObject({ code: 0, signal: null });
    }

    const places = handPlaces(place.stateHome, '/');
    expect(registryOf(place).peek()).toMatchObject({ entries: [], locked: false });
    expect(pathExists(places.registryLock)).toBe(false);
    expect(stagingLeftovers(place.stateHome)).toEqual([]);
    for (const plan of plans) {
      expect(new ServiceCoordination(plan.workspace, { stateHome: place.stateHome }).inspect().status).toBe('stopped');
    }
  });

  it(`${RACERS} processes acquiring disjoint roots while a killed writer's staged folder waits to be swept: all win`, async () => {
    const place = makePlace();
    // A writer dies while publishing its service folder: its staged folder stays in the staging
    // folder, next to its lock and its row. The lock is deleted by hand, so other roots are free.
    const crashedRoot = makeWorkspace(place, 'crashed');
    const crashed = spawnFixture('crasher.mjs', {
      workspace: crashedRoot,
      stateHome: place.stateHome,
      operation: 'acquire',
      config: OWNER_CONFIG,
      endpoint: endpointOf(42_999),
      killBefore: 'create-folder rename',
    });
    expect(await crashed.closed).toMatchObject({ code: null, signal: 'SIGKILL' });
    const places = handPlaces(place.stateHome, '/');
    expect(stagingLeftovers(place.stateHome)).toEqual([expect.stringMatching(new RegExp(`^${crashed.pid}\\..*\\.dir$`))]);
    unlinkSync(places.registryLock);

    // Every racer's first transaction sweeps the same dead writer's folder at once.
    const plans = Array.from({ length: RACERS }, (_, index): RacerPlan => ({
      workspace: makeWorkspace(place, `sweeper-${index}`),
      stateHome: place.stateHome,
      config: OWNER_CONFIG,
      endpoint: endpointOf(42_100 + index),
      then: 'release',
      lockWaitMs: 60_000, // as above: the outcome must not depend on disk speed
    }));
    const results = await race(plans);
    console.log(`${RACERS} disjoint roots, racing sweepers:`, countsOf(results.map((result) => result.outcome)));
    for (const { racer, outcome } of results) {
      const end = await racer.closed;
      expect({ outcome, code: end.code }, end.stderr).toEqual({ outcome: 'won', code: 0 });
    }

    expect(stagingLeftovers(place.stateHome)).toEqual([]);
    expect(pathExists(places.registryLock)).toBe(false);
    // The dead writer's row still fences its root: only recovery lifts it.
    expect(registryOf(place).peek().entries.map((entry) => entry.root)).toEqual([crashedRoot]);
  });
});
