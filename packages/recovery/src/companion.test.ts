import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  codeOfAsync,
  handPlaces,
  jsonOf,
  killAndReap,
  listingOutsideStaging,
  lockCreateSteps,
  lockRemoveSteps,
  makePlace,
  makeWorkspace,
  messagesOf,
  pathExists,
  markRemoveSteps,
  releaseServiceSteps,
  removeSteps,
  replaceSteps,
  serviceFences,
  shownStep,
  spawnCommand,
  spawnPlanned,
  spawnSharedFixture,
  type CrasherStep,
  type SpawnedChild,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  FIXTURE_MODULES,
  finishRecovery,
  FIXTURES,
  journalRecords,
  judgeFenced,
  ownerPlan,
  recoverWith,
  viewOf,
  type OwnerPlan,
  type RecovererPlan,
} from '../test/helpers.js';
import { diagnose, outlivingProgram } from './index.js';

afterEach(cleanUp);

// An owner fences the workspace with a second process of its own (`fenceProcess`: `leasehold run`'s
// command). Killed (SIGKILL) while that process lives, it leaves a workspace that recovery shows as
// held by a live process and refuses, until that process is gone too.

const WORKSPACE = 'state/v1/workspaces/<ws>';
const SERVICE = `${WORKSPACE}/service`;
const REGISTRY = 'state/v1/registry';

/** A process that acts in the workspace for its owner: alive until killed. */
const liveChild = () => spawnCommand('sleep', ['1000']);

/** A place where an owner child ran `plan` with `companion` fenced, and was killed (SIGKILL) where the plan says. */
async function ownerKilled(plan: (place: TestPlace, root: string) => OwnerPlan, companion: SpawnedChild) {
  const place = makePlace('recovery');
  const root = makeWorkspace(place, 'workspace');
  const owner = spawnSharedFixture('crasher', { ...plan(place, root), companion: companion.pid }, FIXTURE_MODULES);
  const end = await owner.closed;
  expect(end, end.stderr).toMatchObject({ code: null, signal: 'SIGKILL' });
  expect(messagesOf(owner, 'fenced')).toEqual([{ fenced: companion.pid }]);
  return { place, root, owner, places: handPlaces(place.stateHome, root) };
}

/** The holders of a snapshot as `[pid, verdict, fence kinds]`. */
function holdersOf(place: TestPlace, root: string) {
  return viewOf(place, root).holders.map(({ holder, verdict, fences }) => [holder.pid, verdict, fences]);
}

describe('an owner killed (SIGKILL) while the process it fenced the workspace with lives', () => {
  it('shows that process live and refuses (quarantine, nothing changed); once it is killed, shows it absent and recovers', async () => {
    const child = liveChild();
    const { place, root, owner, places } = await ownerKilled(
      (at, workspace) => ownerPlan(at, workspace, 'acquire', 'end'),
      child,
    );

    const snapshot = viewOf(place, root);
    expect(snapshot.fences.map((fence) => fence.kind)).toEqual([
      'registry-row',
      'service-format',
      'service-config',
      'registration',
      'owner-lock',
      'capability',
      'companion',
      'checkout-lock',
      'folder-mark',
    ]);
    // The companion names the child, under the dead owner's epoch.
    const { schema, epoch, ...named } = jsonOf(places.companion) as { schema: string; epoch: string; pid: number };
    expect([schema, epoch, named.pid]).toEqual([
      'leasehold.companion/1',
      (jsonOf(places.registration) as { epoch: string }).epoch,
      child.pid,
    ]);
    expect(snapshot.fences.find((fence) => fence.kind === 'companion')).toEqual({
      kind: 'companion',
      path: places.companion,
      holder: named,
    });
    expect(holdersOf(place, root)).toEqual([
      [owner.pid, 'absent', ['registry-row', 'registration', 'owner-lock', 'checkout-lock', 'folder-mark']],
      [child.pid, 'live', ['companion']],
    ]);
    // The owner is gone and the process it fenced the workspace with lives on: named, with the stop remedy.
    expect(outlivingProgram(snapshot)).toEqual(named);
    expect(diagnose(place.stateHome)).toEqual([
      {
        kind: 'outliving-program',
        path: places.companion,
        workspace: root,
        problem: expect.stringMatching(
          new RegExp(
            `lives on: pid ${child.pid} on \\S+, started as \\["sleep","1000"\\], in process group [1-9][0-9]*; `,
          ),
        ),
        remedy: { kind: 'stop', workspace: root, stateHome: place.stateHome },
      },
    ]);

    const before = listingOutsideStaging(place.stateHome);
    expect(await codeOfAsync(recoverWith(place, root, snapshot.digest))).toBe('quarantine');
    expect(listingOutsideStaging(place.stateHome)).toEqual(before);
    expect(journalRecords(place.stateHome)).toEqual([]);

    await killAndReap(child);
    expect(holdersOf(place, root)).toEqual([
      [owner.pid, 'absent', ['registry-row', 'registration', 'owner-lock', 'checkout-lock', 'folder-mark']],
      [child.pid, 'absent', ['companion']],
    ]);
    expect(outlivingProgram(viewOf(place, root))).toBeUndefined();
    expect(diagnose(place.stateHome).map((finding) => finding.kind)).toEqual(['dead-owner']);
    await finishRecovery(place, root);
    expect(pathExists(places.companion)).toBe(false);
    const [record] = journalRecords(place.stateHome);
    const fences = (jsonOf(`${places.namespace}/journal/${record}`) as { fences: { kind: string; holder?: unknown }[] })
      .fences;
    expect(fences.find((fence) => fence.kind === 'companion')).toEqual({
      kind: 'companion',
      path: places.companion,
      holder: named,
    });
  });

  it('recovery removes the companion first, before the registration is written stopped', async () => {
    const child = liveChild();
    const { place, root } = await ownerKilled((at, workspace) => ownerPlan(at, workspace, 'acquire', 'end'), child);
    await killAndReap(child);
    const steps: string[] = [];
    const outcome = await recoverWith(place, root, viewOf(place, root).digest, {
      hooks: { beforeMutation: (step) => steps.push(shownStep({ step }, place, root)) },
    });
    expect(outcome).toMatchObject({ recovered: true });
    expect(steps).toEqual([
      'directory mkdir state/v1/journal',
      'directory fsync-directory state/v1',
      'create write state/v1/.staging/<temp>',
      'create fsync state/v1/.staging/<temp>',
      'create link state/v1/journal/<record>',
      'create unlink state/v1/.staging/<temp>',
      'create fsync-directory state/v1/journal',
      ...removeSteps(`${SERVICE}/companion.json`),
      ...releaseServiceSteps(SERVICE),
      ...markRemoveSteps('workspaces/workspace'),
      ...lockCreateSteps(`${REGISTRY}/registry.lock`),
      ...replaceSteps(`${REGISTRY}/roots.json`),
      ...removeSteps(`${WORKSPACE}/checkout.lock`),
      ...lockRemoveSteps(`${REGISTRY}/registry.lock`),
    ]);
    expect(serviceFences(place.stateHome, root)).toEqual([]);
  });
});

/** The crash points a companion adds to a release: before its removal, before that removal's fsync, and right after it. */
const RELEASE_POINTS: readonly {
  readonly name: string;
  readonly killBefore: (places: ReturnType<typeof handPlaces>) => CrasherStep;
  readonly companionLeft: boolean;
}[] = [
  {
    name: "before the companion's unlink",
    killBefore: (places) => ({ operation: 'remove', action: 'unlink', path: places.companion }),
    companionLeft: true,
  },
  {
    name: "before the companion's folder fsync",
    killBefore: (places) => ({ operation: 'remove', action: 'fsync-directory', path: places.service }),
    companionLeft: false,
  },
  {
    name: 'before the registration is written stopped',
    killBefore: () => ({ operation: 'replace', action: 'write' }),
    companionLeft: false,
  },
];

for (const { name, killBefore, companionLeft } of RELEASE_POINTS)
  describe(`an owner killed (SIGKILL) in a release with a companion, ${name}`, () => {
    it('leaves every other fence naming the dead owner, refused while the companion is named and live, then recovered', async () => {
      const child = liveChild();
      const { place, root, owner, places } = await ownerKilled(
        (at, workspace) => ({
          ...ownerPlan(at, workspace, 'release'),
          killBefore: killBefore(handPlaces(at.stateHome, workspace)),
        }),
        child,
      );
      expect(pathExists(places.companion)).toBe(companionLeft);
      expect(serviceFences(place.stateHome, root)).toEqual([
        'registry row',
        'owner.lock',
        'local-capability.json',
        ...(companionLeft ? ['companion.json'] : []),
        'registration (idle)',
        "checkout.lock (a registration's)",
        'folder mark',
      ]);
      const ownerFences = ['registry-row', 'registration', 'owner-lock', 'checkout-lock', 'folder-mark'];
      const expected = [
        [owner.pid, 'absent', ownerFences],
        ...(companionLeft ? [[child.pid, 'live', ['companion']]] : []),
      ];
      expect(holdersOf(place, root)).toEqual(expected);
      if (companionLeft)
        expect(await codeOfAsync(recoverWith(place, root, viewOf(place, root).digest))).toBe('quarantine');
      await killAndReap(child);
      await judgeFenced(place, root, 'release with a companion');
      await finishRecovery(place, root);
    });
  });

describe('a recovery killed (SIGKILL) right after it removed the companion', () => {
  it('leaves every other fence naming the dead owner, which the next recovery clears', async () => {
    const child = liveChild();
    const { place, root, owner, places } = await ownerKilled(
      (at, workspace) => ownerPlan(at, workspace, 'acquire', 'end'),
      child,
    );
    await killAndReap(child);
    // The journal record's 7 steps, the companion's unlink and folder fsync: killed before the registration's.
    const plan: RecovererPlan = {
      workspace: root,
      stateHome: place.stateHome,
      digest: viewOf(place, root).digest,
      killAt: 10,
    };
    const recoverer = spawnPlanned(FIXTURES, 'recoverer.mjs', plan);
    expect(await recoverer.closed).toMatchObject({ code: null, signal: 'SIGKILL' });
    expect(
      messagesOf(recoverer, 'step')
        .map((message) => shownStep(message, place, root))
        .slice(7),
    ).toEqual([...removeSteps(`${SERVICE}/companion.json`), `replace write state/v1/.staging/<temp>`]);
    expect(pathExists(places.companion)).toBe(false);
    expect(holdersOf(place, root)).toEqual([
      [owner.pid, 'absent', ['registry-row', 'registration', 'owner-lock', 'checkout-lock', 'folder-mark']],
    ]);
    await judgeFenced(place, root, 'recovery killed after the companion');
    await finishRecovery(place, root);
  });
});
