import { afterEach, describe, expect, it } from 'vitest';
import { Registry } from '@leasehold/registry';
import {
  cleanUp,
  countsOf,
  loopbackEndpoint,
  handPlaces,
  makePlace,
  makeWorkspace,
  messageOf,
  pathExists,
  spawnPlanned,
  type SpawnedChild,
  type TestPlace,
} from '@leasehold/test-utils';
import { OWNER_CONFIG, PROCESS_FIXTURES, stagingLeftovers, stepAt, type StepperPlan } from '../test/process-helpers.js';
import { inspectWorkspace, openWorkspace } from './index.js';

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
  const racers = plans.map((plan) => ({ racer: spawnPlanned(PROCESS_FIXTURES, 'racer.mjs', plan), plan }));
  await Promise.all(racers.map(({ racer }) => messageOf(racer, 'ready')));
  for (const { racer } of racers) racer.send('go');
  return Promise.all(
    racers.map(async ({ racer, plan }) => ({
      racer,
      plan,
      outcome: String((await messageOf(racer, 'outcome')).outcome),
    })),
  );
}

function registryOf(place: TestPlace): Registry {
  return new Registry(place.stateHome);
}

describe('processes racing acquire (docs/ownership.md, "Exclusion" and "Many owners in one state home")', () => {
  it(`${RACERS} processes acquiring one root at once: exactly one wins, the others are refused`, async () => {
    const place = makePlace('process');
    const root = makeWorkspace(place, 'shared');
    const plans = Array.from({ length: RACERS }, (_, index): RacerPlan => ({
      workspace: root,
      stateHome: place.stateHome,
      config: OWNER_CONFIG,
      endpoint: loopbackEndpoint(41_000 + index),
      then: 'hold',
      // Generous, so that every loser gets the lock at last (however slow the disk) and finds the
      // winner's row: the outcome depends on exclusion alone, never on disk speed.
      lockWaitMs: 60_000,
    }));
    const results = await race(plans);
    console.log(`one root, ${RACERS} racers:`, countsOf(results.map((result) => result.outcome)));

    const winners = results.filter((result) => result.outcome === 'won');
    expect(winners).toHaveLength(1);
    const winner = winners[0]!;
    const losers = results.filter((result) => result !== winner);
    // Every loser is refused by the winner's row: no writer fails in this race, so no lock is
    // left behind (`quarantine` would be a false fence) and none waits out the bound (`busy`).
    expect(
      countsOf(losers.map((loser) => loser.outcome)),
      losers.map((loser) => loser.racer.lines.join('\n')).join('\n'),
    ).toEqual({
      conflict: RACERS - 1,
    });
    for (const loser of losers) expect(await loser.racer.closed).toMatchObject({ code: 0, signal: null });

    // Every loser has exited: the registry is unlocked and holds exactly the winner's row.
    const registry = registryOf(place);
    expect(registry.readLock()).toBeUndefined();
    const { entries } = registry.list();
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ root, endpoint: winner.plan.endpoint, pid: winner.racer.pid });
    expect(inspectWorkspace(openWorkspace(root, { stateHome: place.stateHome }))).toMatchObject({
      status: 'unavailable',
      owner: { pid: winner.racer.pid, endpoint: winner.plan.endpoint, phase: 'idle' },
    });

    winner.racer.send('release');
    await messageOf(winner.racer, 'released');
    expect(await winner.racer.closed).toMatchObject({ code: 0, signal: null });
    expect(registryOf(place).list().entries).toEqual([]);
    expect(registryOf(place).readLock()).toBeUndefined();
    expect(inspectWorkspace(openWorkspace(root, { stateHome: place.stateHome })).status).toBe('stopped');
  });

  it(`${RACERS} processes acquiring ${RACERS} disjoint roots at once: all win, and all release cleanly`, async () => {
    const place = makePlace('process');
    const plans = Array.from({ length: RACERS }, (_, index): RacerPlan => ({
      workspace: makeWorkspace(place, `disjoint-${index}`),
      stateHome: place.stateHome,
      config: OWNER_CONFIG,
      endpoint: loopbackEndpoint(42_000 + index),
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
    expect(registryOf(place).list().entries).toEqual([]);
    expect(pathExists(places.registryLock)).toBe(false);
    expect(stagingLeftovers(place.stateHome)).toEqual([]);
    for (const plan of plans) {
      expect(inspectWorkspace(openWorkspace(plan.workspace, { stateHome: place.stateHome })).status).toBe('stopped');
    }
  });

  it(`${RACERS} processes acquiring disjoint roots over a killed writer's registry lock and staged folder: all win`, async () => {
    const place = makePlace('process');
    // A writer dies inside its registry transaction while publishing its service folder: its
    // registry lock, its staged folder and its row stay. Nothing is removed by hand.
    const crashedRoot = makeWorkspace(place, 'crashed');
    const crashedPlaces = handPlaces(place.stateHome, crashedRoot);
    const plan: StepperPlan = {
      workspace: crashedRoot,
      stateHome: place.stateHome,
      config: OWNER_CONFIG,
      endpoint: loopbackEndpoint(42_999),
      during: 'acquire',
      at: stepAt('create-folder', 'rename', crashedPlaces.service),
      then: 'kill',
    };
    const crashed = spawnPlanned(PROCESS_FIXTURES, 'stepper.mjs', plan);
    expect(await crashed.closed).toMatchObject({ code: null, signal: 'SIGKILL' });
    expect(stagingLeftovers(place.stateHome)).toEqual([
      expect.stringMatching(new RegExp(`^${crashed.pid}\\..*\\.dir$`)),
    ]);
    expect(registryOf(place).readLock()).toMatchObject({
      verdict: 'absent',
      lock: { pid: crashed.pid, root: crashedRoot },
    });

    // Every racer's first transaction finds the same dead lock and the same dead writer's folder at once.
    const plans = Array.from({ length: RACERS }, (_, index): RacerPlan => ({
      workspace: makeWorkspace(place, `sweeper-${index}`),
      stateHome: place.stateHome,
      config: OWNER_CONFIG,
      endpoint: loopbackEndpoint(42_100 + index),
      then: 'release',
      lockWaitMs: 60_000, // as above: the outcome must not depend on disk speed
    }));
    const results = await race(plans);
    console.log(
      `${RACERS} disjoint roots, racing over a dead lock and its staged folder:`,
      countsOf(results.map((result) => result.outcome)),
    );
    for (const { racer, outcome } of results) {
      const end = await racer.closed;
      expect({ outcome, code: end.code }, end.stderr).toEqual({ outcome: 'won', code: 0 });
    }

    const registry = registryOf(place);
    expect(stagingLeftovers(place.stateHome)).toEqual([]);
    expect(registry.readLock()).toBeUndefined();
    expect(registry.readMarkers()).toEqual([]);
    // The dead writer's row still fences its root: only recovery lifts it.
    expect(registry.list().entries.map((entry) => entry.root)).toEqual([crashedRoot]);
    expect(inspectWorkspace(openWorkspace(crashedRoot, { stateHome: place.stateHome }))).toEqual({
      status: 'unavailable',
      reason: 'a registry row has no service state',
    });
  });
});
