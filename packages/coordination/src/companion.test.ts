import { rmSync } from 'node:fs';
import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { processIdentity } from '@leasehold/private-files';
import {
  cleanUp,
  codeOfAsync,
  handPlaces,
  jsonOf,
  killAndReap,
  loopbackEndpoint,
  makePlace,
  makeWorkspace,
  messagesOf,
  pathExists,
  removeSteps,
  shownStep,
  spawnCommand,
  spawnSharedFixture,
  type TestPlace,
} from '@leasehold/test-utils';
import { RELEASE_STEPS } from '../test/crash-helpers.js';
import { FIXTURE_MODULES, stateTreeOf } from '../test/functional-helpers.js';
import { OWNER_CONFIG } from '../test/process-helpers.js';
import { ContractError, acquireWorkspace, fileOwnership, openWorkspace } from './index.js';

afterEach(cleanUp);

const OWNER_ENDPOINT = loopbackEndpoint(44_101);
const CHILD_OWNER_ENDPOINT = loopbackEndpoint(44_102);

/** A process that acts in the workspace for its owner (as `leasehold run`'s command would): alive until killed. */
const liveChild = () => spawnCommand('sleep', ['1000']);

/** How this host names a process of its own in a message. */
const named = (pid: number, status: string) => `pid ${pid} on host ${hostname()} (${status})`;

/** A workspace owned through the seam by this process, every mutating step shown in `steps`. */
async function ownedWorkspace() {
  const place = makePlace('process');
  const root = makeWorkspace(place, 'workspace');
  const steps: string[] = [];
  const ownership = fileOwnership({
    stateHome: place.stateHome,
    hooks: { beforeMutation: (step) => steps.push(shownStep({ step }, place, root)) },
  });
  const lease = await ownership.acquire(root, OWNER_CONFIG, { boundEndpoint: OWNER_ENDPOINT });
  return { place, root, ownership, lease, steps, places: handPlaces(place.stateHome, root) };
}

/** The error an acquire of `root` by this process is refused with, once nothing under the state home changed. */
async function refusedAcquire(place: TestPlace, root: string): Promise<ContractError> {
  const before = stateTreeOf(place.stateHome);
  const error = await acquireWorkspace(
    openWorkspace(root, { stateHome: place.stateHome, lockWaitMs: 200 }),
    OWNER_CONFIG,
    OWNER_ENDPOINT,
  ).then(
    () => undefined,
    (rejection: unknown) => rejection,
  );
  expect(stateTreeOf(place.stateHome)).toEqual(before);
  if (!ContractError.is(error)) throw new Error(`expected a ContractError, got ${String(error)}`);
  return error;
}

describe('fenceProcess: a second process of the owner fences the workspace too', () => {
  it('writes companion.json naming the live process and this epoch; assert checks it; one per lease; release removes it first', async () => {
    const { lease, ownership, root, steps, places } = await ownedWorkspace();
    const child = liveChild();
    await lease.fenceProcess(child.pid);
    expect(jsonOf(places.companion)).toEqual({
      schema: 'leasehold.companion/1',
      epoch: lease.owner.epoch,
      ...processIdentity(child.pid),
    });
    await lease.assert();

    expect(await codeOfAsync(lease.fenceProcess(liveChild().pid))).toBe('refused');
    expect(await codeOfAsync(lease.fenceProcess(child.pid))).toBe('refused');
    await lease.assert();

    steps.splice(0);
    await lease.release();
    expect(steps).toEqual([...removeSteps('state/v1/workspaces/<ws>/service/companion.json'), ...RELEASE_STEPS]);
    expect(pathExists(places.companion)).toBe(false);
    expect(await ownership.inspect(root)).toMatchObject({ status: 'stopped', epoch: lease.owner.epoch });
    expect(await codeOfAsync(lease.fenceProcess(liveChild().pid))).toBe('unavailable');
  });

  it('refuses a process that is gone and writes nothing', async () => {
    const { lease, places } = await ownedWorkspace();
    const child = liveChild();
    await killAndReap(child);
    expect(await codeOfAsync(lease.fenceProcess(child.pid))).toBe('refused');
    expect(pathExists(places.companion)).toBe(false);
    await lease.assert();
    await lease.release();
  });

  it('is one of the files the owner holds: removed under it, the lease is lost', async () => {
    const { lease, places } = await ownedWorkspace();
    await lease.fenceProcess(liveChild().pid);
    rmSync(places.companion);
    expect(await codeOfAsync(lease.assert())).toBe('conflict');
  });
});

describe('an owner killed (SIGKILL) while the process it fenced the workspace with lives', () => {
  it('refuses a new acquire with conflict naming that process while it lives, then quarantine naming both, changing nothing', async () => {
    const place = makePlace('process');
    const root = makeWorkspace(place, 'workspace');
    const child = liveChild();
    const plan = {
      workspace: root,
      stateHome: place.stateHome,
      operation: 'acquire',
      config: OWNER_CONFIG,
      endpoint: CHILD_OWNER_ENDPOINT,
    } as const;
    const owner = spawnSharedFixture('crasher', { ...plan, companion: child.pid, killAt: 'end' }, FIXTURE_MODULES);
    expect(await owner.closed).toMatchObject({ code: null, signal: 'SIGKILL' });
    expect(messagesOf(owner, 'fenced')).toEqual([{ fenced: child.pid }]);

    const whileLive = await refusedAcquire(place, root);
    expect(whileLive.code).toBe('conflict');
    expect(whileLive.message).toContain(named(child.pid, 'live'));

    await killAndReap(child);
    const afterwards = await refusedAcquire(place, root);
    expect(afterwards.code).toBe('quarantine');
    expect(afterwards.message).toContain(named(owner.pid, 'absent'));
    expect(afterwards.message).toContain(named(child.pid, 'absent'));
  });
});
