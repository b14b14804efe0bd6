import { afterEach, describe, expect, it } from 'vitest';
import { Registry } from '@leasehold/registry';
import {
  cleanUp,
  codeOfAsync,
  handPlaces,
  killAndReap,
  listingOutsideStaging,
  loopbackEndpoint,
  makePlace,
  makeWorkspace,
  messageOf,
  pathExists,
  spawnPlanned,
  type HandPlaces,
  type SpawnedChild,
  type TestPlace,
} from '@leasehold/test-utils';
import { OWNER_CONFIG, PROCESS_FIXTURES, stepAt, type StepperPlan } from '../test/process-helpers.js';
import { Checkout, acquireWorkspace, inspectWorkspace, openWorkspace, type Inspection } from './index.js';

afterEach(cleanUp);

/** One place to stop a live writer, and what `inspect` must answer there (while it is live; once it is dead). */
interface PausePoint {
  readonly during: 'acquire' | 'release';
  readonly at: (places: HandPlaces) => string;
  readonly live: Inspection;
  readonly dead: Inspection;
}

/** An `unavailable` answer whose reason `reason` gives, in progress or not. */
function unavailable(reason: string, inProgress: boolean): Inspection {
  return { status: 'unavailable', reason, ...(inProgress ? { inProgress: true as const } : {}) };
}

const NO_SERVICE_STATE = 'a registry row has no service state';
const OUTLIVED = 'a registry row outlived its registration';

/** The `refused` reason a state gives when `file` is present without a live registration. */
function presentWithoutOwner(file: string): string {
  return `refused: ${file}: present without a live registration`;
}

const POINTS: readonly { readonly name: string; readonly point: (places: HandPlaces) => PausePoint }[] = [
  {
    name: 'acquire, inside its transaction, before the row is swapped in',
    // Nothing of it is visible yet (the registry lock is no fence): absent, live or dead.
    point: (places) => ({
      during: 'acquire',
      at: () => stepAt('replace', 'rename', places.roots),
      live: { status: 'absent' },
      dead: { status: 'absent' },
    }),
  },
  {
    name: 'acquire, inside its transaction, row published, before the service folder',
    point: (places) => ({
      during: 'acquire',
      at: () => stepAt('create-folder', 'rename', places.service),
      live: unavailable(NO_SERVICE_STATE, true),
      dead: unavailable(NO_SERVICE_STATE, false),
    }),
  },
  {
    name: 'acquire, after its transaction, before the checkout lock',
    point: (places) => ({
      during: 'acquire',
      at: () => stepAt('create', 'link', places.checkoutLock),
      live: unavailable(OUTLIVED, true),
      dead: unavailable(OUTLIVED, false),
    }),
  },
  {
    name: 'acquire, before owner.lock',
    point: (places) => ({
      during: 'acquire',
      at: () => stepAt('create', 'link', places.ownerLock),
      live: unavailable(OUTLIVED, true),
      dead: unavailable(OUTLIVED, false),
    }),
  },
  {
    name: 'acquire, before the capability',
    point: (places) => ({
      during: 'acquire',
      at: () => stepAt('create', 'link', places.capability),
      live: unavailable(presentWithoutOwner(places.ownerLock), true),
      dead: unavailable(presentWithoutOwner(places.ownerLock), false),
    }),
  },
  {
    name: 'acquire, before the registration',
    point: (places) => ({
      during: 'acquire',
      at: () => stepAt('create', 'link', places.registration),
      live: unavailable(presentWithoutOwner(places.ownerLock), true),
      dead: unavailable(presentWithoutOwner(places.ownerLock), false),
    }),
  },
  {
    name: 'release, registration stopped, before the capability is removed',
    point: (places) => ({
      during: 'release',
      at: () => stepAt('remove', 'unlink', places.capability),
      live: unavailable(presentWithoutOwner(places.ownerLock), true),
      dead: unavailable(presentWithoutOwner(places.ownerLock), false),
    }),
  },
  {
    name: 'release, before owner.lock is removed',
    point: (places) => ({
      during: 'release',
      at: () => stepAt('remove', 'unlink', places.ownerLock),
      live: unavailable(presentWithoutOwner(places.ownerLock), true),
      dead: unavailable(presentWithoutOwner(places.ownerLock), false),
    }),
  },
  {
    name: 'release, inside its transaction, before the row is swapped out',
    point: (places) => ({
      during: 'release',
      at: () => stepAt('replace', 'rename', places.roots),
      live: unavailable(`refused: ${places.checkoutLock}: still carries the stopped registration`, true),
      dead: unavailable(`refused: ${places.checkoutLock}: still carries the stopped registration`, false),
    }),
  },
  {
    name: 'release, inside its transaction, row removed, before the checkout lock is removed',
    // No row names the process any more: the stopped registration does.
    point: (places) => ({
      during: 'release',
      at: () => stepAt('remove', 'unlink', places.checkoutLock),
      live: unavailable(`refused: ${places.checkoutLock}: still carries the stopped registration`, true),
      dead: unavailable(`refused: ${places.checkoutLock}: still carries the stopped registration`, false),
    }),
  },
];

/** Starts a stepper that pauses at `point` (after acquire for a release point) and waits until it is paused. */
async function pausedAt(place: TestPlace, root: string, point: PausePoint, places: HandPlaces): Promise<SpawnedChild> {
  const plan: StepperPlan = {
    workspace: root,
    stateHome: place.stateHome,
    config: OWNER_CONFIG,
    endpoint: loopbackEndpoint(44_000),
    during: point.during,
    at: point.at(places),
    then: 'pause',
  };
  const child = spawnPlanned(PROCESS_FIXTURES, 'stepper.mjs', plan);
  if (point.during === 'release') {
    await messageOf(child, 'acquired');
    child.send('release');
  }
  const { at } = (await messageOf(child, 'at')) as { at: { operation: string; action: string; path: string } };
  expect(stepAt(at.operation, at.action, at.path)).toBe(plan.at);
  return child;
}

describe('inspect while a live process is between two steps of its acquire or release', () => {
  for (const { name, point: pointOf } of POINTS) {
    it(`${name}: in progress while it lives, not once it is dead`, async () => {
      const place = makePlace('process');
      const root = makeWorkspace(place, 'stepped');
      const places = handPlaces(place.stateHome, root);
      const point = pointOf(places);
      // The registry exists before the child starts, as it would on any used host.
      await new Registry(place.stateHome).transaction(place.base, () => undefined);
      const child = await pausedAt(place, root, point, places);
      const coordination = openWorkspace(root, { stateHome: place.stateHome });

      // Paused: the same answer on every read (nothing moves), in progress.
      for (let read = 0; read < 3; read += 1) expect(inspectWorkspace(coordination)).toEqual(point.live);

      const end = await killAndReap(child);
      expect(end).toMatchObject({ code: null, signal: 'SIGKILL' });
      expect(inspectWorkspace(coordination)).toEqual(point.dead);
    });
  }

  it('a process resumed from the pause finishes its acquire and release, and the workspace reads stopped', async () => {
    const place = makePlace('process');
    const root = makeWorkspace(place, 'resumed');
    const places = handPlaces(place.stateHome, root);
    const child = await pausedAt(place, root, POINTS[3]!.point(places), places);
    const coordination = openWorkspace(root, { stateHome: place.stateHome });
    expect(inspectWorkspace(coordination)).toEqual(unavailable(OUTLIVED, true));
    child.send('go');
    const { epoch } = (await messageOf(child, 'acquired')).acquired as { epoch: string };
    expect(inspectWorkspace(coordination)).toMatchObject({
      status: 'unavailable',
      owner: { epoch, pid: child.pid, phase: 'idle' },
    });
    expect(inspectWorkspace(coordination)).not.toHaveProperty('inProgress');
    child.send('release');
    await messageOf(child, 'released');
    expect(await child.closed).toMatchObject({ code: 0, signal: null });
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch });
  });
});

describe("a plain tool while a service's row exists", () => {
  it("is refused (conflict) before the service's own checkout lock exists, with nothing written", async () => {
    const place = makePlace('process');
    const root = makeWorkspace(place, 'reserved');
    const places = handPlaces(place.stateHome, root);
    const child = await pausedAt(place, root, POINTS[2]!.point(places), places);
    // The row is there, the service's checkout lock not yet.
    expect(new Registry(place.stateHome).rowOf(root).row).toMatchObject({ root, pid: child.pid });
    expect(pathExists(places.checkoutLock)).toBe(false);

    const checkout = new Checkout(root, { stateHome: place.stateHome });
    const before = listingOutsideStaging(place.stateHome);
    expect(await codeOfAsync(() => checkout.acquire())).toBe('conflict');
    expect(pathExists(places.checkoutLock)).toBe(false);
    expect(listingOutsideStaging(place.stateHome)).toEqual(before);
    // Nor can another service take the root.
    const rival = openWorkspace(root, { stateHome: place.stateHome });
    expect(await codeOfAsync(() => acquireWorkspace(rival, OWNER_CONFIG, loopbackEndpoint(44_001)))).toBe('conflict');

    // Let the service finish: its own checkout lock keeps the tool out; after release the tool gets in.
    child.send('go');
    await messageOf(child, 'acquired');
    expect(await codeOfAsync(() => checkout.acquire())).toBe('conflict');
    child.send('release');
    await messageOf(child, 'released');
    expect(await child.closed).toMatchObject({ code: 0, signal: null });
    (await checkout.acquire()).release();
  });
});
