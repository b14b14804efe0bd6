import { unlinkSync } from 'node:fs';
import { posix } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  codeOfAsync,
  countsOf,
  createSteps,
  endpointOf,
  handPlaces,
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
  checkoutLockExists,
  makePlace,
  spawnFixture,
  stagingLeftovers,
  undecodableFiles,
  type TestPlace,
} from '../test/process-helpers.js';
import { ServiceCoordination, type OwnerLease } from './index.js';

afterEach(cleanUp);

// SPEC 8.3: a process killed (SIGKILL) before any single mutating step of
// acquire, a phase change or release leaves a state where `inspect` never
// answers `absent` or `stopped` while a service fence remains and a new
// `acquire` is refused (changing nothing); with no fence left, `acquire`
// succeeds. The same holds once the dead writer's registry lock is deleted by
// hand, which makes the order of the other steps visible.

const CHILD_ENDPOINT = endpointOf(44_001);
const PARENT_ENDPOINT = endpointOf(44_002);
const PREPARE_ENDPOINT = endpointOf(44_000);
const REFUSALS = ['quarantine', 'conflict', 'refused', 'busy'];

// ---- The expected step lists, written from SPEC 3 (how private-files publishes) and 5.3 (the order). ----
// Paths are shown relative to the test folder: `state` is the state home, `<ws>` the workspace's private root,
// `<temp>` a staged file and `<folder>` a staged folder.

const STAGING = 'state/v1/.staging';
const REGISTRY = 'state/v1/registry';
const WORKSPACE = 'state/v1/workspaces/<ws>';
const SERVICE = `${WORKSPACE}/service`;

const parentOf = (path: string) => (path === 'state' ? '<base>' : posix.dirname(path));
const madeFolder = (operation: string, path: string) => [`${operation} mkdir ${path}`, `${operation} fsync-directory ${parentOf(path)}`];
const serviceFolderPublished = [
  `create-folder mkdir ${STAGING}/<folder>`,
  `create-folder write ${STAGING}/<folder>/format.json`,
  `create-folder fsync ${STAGING}/<folder>/format.json`,
  `create-folder write ${STAGING}/<folder>/config.json`,
  `create-folder fsync ${STAGING}/<folder>/config.json`,
  `create-folder fsync-directory ${STAGING}/<folder>`,
  `create-folder rename ${SERVICE}`,
  `create-folder fsync-directory ${WORKSPACE}`,
];
/** The owner's files, created in SPEC 5.3 order after the reservation. */
const ownerFilesCreated = [
  ...createSteps(`${WORKSPACE}/checkout.lock`),
  ...createSteps(`${SERVICE}/owner.lock`),
  ...createSteps(`${SERVICE}/local-capability.json`),
];

interface Prepared {
  readonly place: TestPlace;
  readonly root: string;
  readonly coordination: ServiceCoordination;
}

interface OperationCase {
  readonly name: string;
  readonly operation: 'acquire' | 'phase' | 'release';
  /** Brings the fresh place to the state the operation starts from; answers the pids of writers killed on the way. */
  readonly prepare?: (prepared: Prepared) => Promise<readonly number[]>;
  readonly expectedSteps: readonly string[];
}

/** The steps of a fresh acquire once the state home, namespace, registry and staging folders exist. */
const acquireInFreshRegistry = [
  // The registry lock, then the registry's initialisation, then the reservation: first after the lock.
  ...createSteps(`${REGISTRY}/registry.lock`),
  ...createSteps(`${REGISTRY}/format.json`),
  ...createSteps(`${REGISTRY}/roots.json`),
  ...replaceSteps(`${REGISTRY}/roots.json`),
  // The service folder, published whole.
  ...madeFolder('directory', 'state/v1/workspaces'),
  ...madeFolder('directory', WORKSPACE),
  ...serviceFolderPublished,
  ...ownerFilesCreated,
  ...createSteps(`${SERVICE}/registration.json`),
  ...removeSteps(`${REGISTRY}/registry.lock`),
];

const CASES: readonly OperationCase[] = [
  {
    name: 'acquire of a fresh workspace in a fresh state home',
    operation: 'acquire',
    expectedSteps: [
      // The state home, the namespace and the registry folder, then the staging folder on first use.
      ...madeFolder('directory', 'state'),
      ...madeFolder('directory', 'state/v1'),
      ...madeFolder('directory', REGISTRY),
      ...madeFolder('create', STAGING),
      ...acquireInFreshRegistry,
    ],
  },
  {
    name: "acquire after a killed writer's staged temp (the sweep's steps too)",
    operation: 'acquire',
    prepare: async ({ place, root }) => {
      // A first writer dies right before publishing the registry lock: its staged temp is left, and no fence.
      const first = spawnFixture('crasher.mjs', { ...crasherPlan('acquire', place, root), killBefore: 'create link' });
      expect(await first.closed).toMatchObject({ code: null, signal: 'SIGKILL' });
      expect(stagingLeftovers(place.stateHome)).toEqual([expect.stringMatching(new RegExp(`^${first.pid}\\..*\\.tmp$`))]);
      expect(serviceFences(place.stateHome, root)).toEqual([]);
      return [first.pid];
    },
    expectedSteps: [`sweep-staging unlink ${STAGING}/<temp>`, `sweep-staging fsync-directory ${STAGING}`, ...acquireInFreshRegistry],
  },
  {
    name: 'acquire over a stopped registration',
    operation: 'acquire',
    prepare: async ({ coordination }) => {
      await (await coordination.acquire(OWNER_CONFIG, PREPARE_ENDPOINT)).release();
      return [];
    },
    expectedSteps: [
      ...createSteps(`${REGISTRY}/registry.lock`),
      ...replaceSteps(`${REGISTRY}/roots.json`),
      ...ownerFilesCreated,
      ...replaceSteps(`${SERVICE}/registration.json`),
      ...removeSteps(`${REGISTRY}/registry.lock`),
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
      ...createSteps(`${REGISTRY}/registry.lock`),
      ...replaceSteps(`${SERVICE}/registration.json`),
      ...replaceSteps(`${REGISTRY}/roots.json`),
      ...removeSteps(`${SERVICE}/local-capability.json`),
      ...removeSteps(`${SERVICE}/owner.lock`),
      // The checkout lock last (SPEC 5.3).
      ...removeSteps(`${WORKSPACE}/checkout.lock`),
      ...removeSteps(`${REGISTRY}/registry.lock`),
    ],
  },
];

/** A fresh place and workspace, prepared for the case; the coordination used by the parent (no hooks). */
async function preparedPlace(operationCase: OperationCase): Promise<Prepared & { deadPids: readonly number[] }> {
  const place = makePlace();
  const root = makeWorkspace(place, 'workspace');
  // A short lock wait: a live holder is never expected here, and `busy` would be a refusal like any other.
  const coordination = new ServiceCoordination(root, { stateHome: place.stateHome, lockWaitMs: 100 });
  const deadPids = (await operationCase.prepare?.({ place, root, coordination })) ?? [];
  return { place, root, coordination, deadPids };
}

function crasherPlan(operation: OperationCase['operation'], place: TestPlace, root: string, killAt?: number | 'end') {
  return {
    workspace: root,
    stateHome: place.stateHome,
    operation,
    config: OWNER_CONFIG,
    endpoint: CHILD_ENDPOINT,
    ...(killAt === undefined ? {} : { killAt }),
  };
}

/** What one scenario showed, for the record. */
interface Judgement {
  readonly fences: readonly string[];
  readonly status: string;
  /** The parent's acquire: `won`, or the refusal code. */
  readonly acquire: string;
  /** Files that did not decode with their schema (each made `inspect` answer `unavailable`). */
  readonly undecodable: number;
}

/**
 * The assertions (i) to (iii) on the state a dead writer left, from this process:
 * (i) `inspect` never answers `absent` or `stopped` while a service fence remains;
 * (iii) every file decodes with its schema, or `inspect` answers `unavailable`;
 * (ii) with a fence (or a checkout lock) left, a new `acquire` is refused and changes nothing but the
 * dead writer's staging leftovers, which every registry transaction sweeps; with none, it succeeds.
 */
async function judge(place: TestPlace, root: string, coordination: ServiceCoordination, deadPids: readonly number[], label: string): Promise<Judgement> {
  const fences = serviceFences(place.stateHome, root);
  const checkoutHeld = checkoutLockExists(place.stateHome, root);
  // Staging leftovers are only ever the dead writers' (swept by the next transaction).
  for (const leftover of stagingLeftovers(place.stateHome)) expect(deadPids, `${label}: ${leftover}`).toContain(Number(leftover.split('.')[0]));

  const inspection = coordination.inspect();
  if (fences.length > 0) expect(['absent', 'stopped'], `${label}: fences ${fences.join(', ')}`).not.toContain(inspection.status);
  else if (checkoutHeld) expect(inspection.status, `${label}: a checkout lock outlived its owner`).toBe('unavailable');
  else expect(['absent', 'stopped'], label).toContain(inspection.status);

  const problems = undecodableFiles(place.stateHome);
  if (problems.length > 0) expect(inspection.status, `${label}: ${problems.join(', ')}`).toBe('unavailable');

  const before = listingOutsideStaging(place.stateHome);
  let lease: OwnerLease | undefined;
  const code = await codeOfAsync(
    coordination.acquire(OWNER_CONFIG, PARENT_ENDPOINT).then((acquired) => {
      lease = acquired;
    }),
  );
  if (fences.length > 0 || checkoutHeld) {
    expect(REFUSALS, `${label}: fences ${fences.join(', ')}`).toContain(code);
    expect(listingOutsideStaging(place.stateHome), `${label}: the refused acquire changed the state`).toEqual(before);
    expect(stagingLeftovers(place.stateHome), label).toEqual([]);
    return { fences, status: inspection.status, acquire: code, undecodable: problems.length };
  }
  expect(code, `${label}: no fence is left`).toBe('no error');
  expect(coordination.inspect(), label).toMatchObject({ status: 'unavailable', owner: { pid: process.pid, endpoint: PARENT_ENDPOINT } });
  await lease!.release();
  expect(coordination.inspect().status, label).toBe('stopped');
  expect(serviceFences(place.stateHome, root), label).toEqual([]);
  return { fences, status: inspection.status, acquire: 'won', undecodable: problems.length };
}

/** Runs `work` over `items`, two at a time (the machine has two cores; children are short-lived). */
async function twoAtATime<T>(items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  const lane = async (): Promise<void> => {
    while (next < items.length && !failed) {
      try {
        await work(items[next++]!);
      } catch (error) {
        failed = true; // the other lane stops too, so no child is spawned after the test ended
        throw error;
      }
    }
  };
  await Promise.all([lane(), lane()]);
}

describe('a writer killed (SIGKILL) before any mutating step (SPEC 8.3)', () => {
  for (const operationCase of CASES) {
    it(operationCase.name, async () => {
      // The dry run: the whole operation in a child, every step reported.
      const dry = await preparedPlace(operationCase);
      const dryRun = spawnFixture('crasher.mjs', crasherPlan(operationCase.operation, dry.place, dry.root));
      const done = await messageOf(dryRun, 'done');
      expect(await dryRun.closed).toMatchObject({ code: 0, signal: null });
      const steps = messagesOf(dryRun, 'step').map((message) => shownStep(message, dry.place, dry.root));
      console.log(`${operationCase.name}: ${steps.length} steps\n${steps.map((step, index) => `  ${index + 1}. ${step}`).join('\n')}`);
      expect(steps).toEqual(operationCase.expectedSteps);
      expect(done.steps).toBe(operationCase.expectedSteps.length);

      // Every crash point: killed before step k, for k in 1..N, and once after the operation returned.
      const crashPoints: (number | 'end')[] = [...Array.from({ length: steps.length }, (_, index) => index + 1), 'end'];
      const judgements: { variant: string; judgement: Judgement }[] = [];
      await twoAtATime(crashPoints, async (killAt) => {
        const { place, root, coordination, deadPids } = await preparedPlace(operationCase);
        const child = spawnFixture('crasher.mjs', crasherPlan(operationCase.operation, place, root, killAt));
        const end = await child.closed;
        expect(end, `killed at ${killAt}: ${end.stderr}`).toMatchObject({ code: null, signal: 'SIGKILL' });
        const reported = messagesOf(child, 'step').map((message) => (message.step as { n: number }).n);
        expect(reported.at(-1)).toBe(killAt === 'end' ? steps.length : killAt);
        expect(messagesOf(child, 'done')).toHaveLength(killAt === 'end' ? 1 : 0);

        const label = `${operationCase.name}, killed ${killAt === 'end' ? 'after the last step' : `before step ${killAt}: ${steps[killAt - 1]}`}`;
        judgements.push({ variant: 'as left', judgement: await judge(place, root, coordination, [...deadPids, child.pid], label) });
        // Then the dead writer's lock deleted by hand, on the state as the refused acquire left it:
        // unchanged, but for the dead writers' staging leftovers, which it swept.
        const lock = handPlaces(place.stateHome, root).registryLock;
        if (pathExists(lock)) {
          unlinkSync(lock);
          const unlocked = await judge(place, root, coordination, [...deadPids, child.pid], `${label}, registry lock deleted by hand`);
          judgements.push({ variant: 'lock deleted by hand', judgement: unlocked });
        }
      });

      console.log(
        `${operationCase.name}: ${steps.length} crash points (+1 after the last step), ${judgements.length} scenarios`,
        {
          'as left: inspect': countsOf(judgements.filter((j) => j.variant === 'as left').map((j) => j.judgement.status)),
          'as left: acquire': countsOf(judgements.filter((j) => j.variant === 'as left').map((j) => j.judgement.acquire)),
          'lock deleted: inspect': countsOf(judgements.filter((j) => j.variant !== 'as left').map((j) => j.judgement.status)),
          'lock deleted: acquire': countsOf(judgements.filter((j) => j.variant !== 'as left').map((j) => j.judgement.acquire)),
          'undecodable files': judgements.reduce((total, j) => total + j.judgement.undecodable, 0),
        },
      );
      expect(judgements.filter((j) => j.variant === 'as left')).toHaveLength(crashPoints.length);
    });
  }
});
