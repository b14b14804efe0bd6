import { join } from 'node:path';
import { expect } from 'vitest';
import {
  codeOfAsync,
  countsOf,
  handPlaces,
  listingOutsideStaging,
  loopbackEndpoint,
  makePlace,
  makeWorkspace,
  messageOf,
  messagesOf,
  namesIn,
  pathExists,
  serviceFences,
  shownStep,
  spawnSharedFixture,
  type CrasherPlan,
  type ListedEntry,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  ACQUIRE_AFTER_STAGED_TEMP_STEPS,
  ACQUIRE_FRESH_STEPS,
  ACQUIRE_OVER_STOPPED_STEPS,
  LOCK_REMOVAL_STEPS,
  PHASE_ABSORBED,
  PHASE_STEPS,
  RELEASE_ABSORBED,
  RELEASE_STEPS,
} from './crash-helpers.js';
import { FIXTURE_MODULES } from './functional-helpers.js';
import { OWNER_CONFIG, stagingLeftovers, undecodableFiles } from './process-helpers.js';
import { acquireWorkspace, inspectWorkspace, openWorkspace, type FileLease } from '../src/index.js';

// The crash-safety harness of src/crash-safety.test.ts (SIGKILL) and
// src/io-errors.test.ts (an injected I/O error, then the process exits):
// the operations, a fresh place per crash point, and the judgement of what a
// dead writer left.
//
// Crash safety (docs/persistence.md, "Crash safety"): a process killed
// (SIGKILL), or failing with an I/O error (EIO, ENOSPC), before any single
// mutating step of acquire, a phase change or release leaves a state where
// (a) `inspect` never answers `absent` or `stopped` while a service fence
// remains, and (b) a new `acquire` by another
// process is refused, changing nothing (or, with no fence left, succeeds).
// (c) A registry lock it left is taken over by the next writer of any
// workspace: a writer of another workspace in the same state home runs a full
// acquire and release, and (a) and (b) still hold after that. (That `recover`
// brings every such state to `stopped` is proved in the recovery package.)

const CHILD_ENDPOINT = loopbackEndpoint(44_001);
const PARENT_ENDPOINT = loopbackEndpoint(44_002);
const OTHER_ENDPOINT = loopbackEndpoint(44_003);
const PREPARE_ENDPOINT = loopbackEndpoint(44_000);
/** A refused acquire: a row that overlaps (`conflict`), a registration not stopped (`quarantine`), a broken rule (`refused`). */
const REFUSALS = ['quarantine', 'conflict', 'refused'];

export interface Prepared {
  readonly place: TestPlace;
  readonly root: string;
  /** A workspace of the same state home that no crashed writer touched. */
  readonly otherRoot: string;
  /** Writers killed while the place was prepared. */
  readonly deadPids: readonly number[];
}

export interface OperationCase {
  readonly name: string;
  readonly operation: CrasherPlan['operation'];
  /** Brings the fresh place to the state the operation starts from; answers the pids of writers killed on the way. */
  readonly prepare?: (place: TestPlace, root: string) => Promise<readonly number[]>;
  readonly expectedSteps: readonly string[];
  /** The steps whose I/O error the operation absorbs: it resolves (docs/ownership.md, "The registry transaction", step 5, and "Release"). */
  readonly absorbed: readonly string[];
}

export const CASES: readonly OperationCase[] = [
  {
    name: 'acquire of a fresh workspace in a fresh state home',
    operation: 'acquire',
    expectedSteps: ACQUIRE_FRESH_STEPS,
    absorbed: LOCK_REMOVAL_STEPS,
  },
  {
    name: "acquire after a killed writer's staged temp (the sweep's steps too)",
    operation: 'acquire',
    prepare: async (place, root) => {
      // A first writer dies right before publishing the registry lock: its staged temp is left, and no fence.
      const first = spawnSharedFixture(
        'crasher',
        { ...crasherPlan('acquire', place, root), killBefore: { operation: 'create', action: 'link' } },
        FIXTURE_MODULES,
      );
      expect(await first.closed).toMatchObject({ code: null, signal: 'SIGKILL' });
      expect(stagingLeftovers(place.stateHome)).toEqual([
        expect.stringMatching(new RegExp(`^${first.pid}\\..*\\.tmp$`)),
      ]);
      expect(serviceFences(place.stateHome, root)).toEqual([]);
      return [first.pid];
    },
    expectedSteps: ACQUIRE_AFTER_STAGED_TEMP_STEPS,
    absorbed: LOCK_REMOVAL_STEPS,
  },
  {
    name: 'acquire over a stopped registration',
    operation: 'acquire',
    prepare: async (place, root) => {
      const coordination = openWorkspace(root, { stateHome: place.stateHome });
      await (await acquireWorkspace(coordination, OWNER_CONFIG, PREPARE_ENDPOINT)).release();
      return [];
    },
    expectedSteps: ACQUIRE_OVER_STOPPED_STEPS,
    absorbed: LOCK_REMOVAL_STEPS,
  },
  {
    name: "phase change to 'stopping'",
    operation: 'phase',
    expectedSteps: PHASE_STEPS,
    absorbed: PHASE_ABSORBED,
  },
  {
    name: 'release',
    operation: 'release',
    expectedSteps: RELEASE_STEPS,
    absorbed: RELEASE_ABSORBED,
  },
];

/** A fresh place with two workspaces, prepared for the case. Nothing is shared between crash points. */
export async function preparedPlace(operationCase: OperationCase): Promise<Prepared> {
  const place = makePlace('process');
  const root = makeWorkspace(place, 'workspace');
  const otherRoot = makeWorkspace(place, 'other');
  const deadPids = (await operationCase.prepare?.(place, root)) ?? [];
  return { place, root, otherRoot, deadPids };
}

export function crasherPlan(
  operation: CrasherPlan['operation'],
  place: TestPlace,
  root: string,
  extra: Partial<CrasherPlan> = {},
): CrasherPlan {
  return {
    workspace: root,
    stateHome: place.stateHome,
    operation,
    config: OWNER_CONFIG,
    endpoint: CHILD_ENDPOINT,
    ...extra,
  };
}

/** The dry run: the whole operation in a child, every step reported; it must be exactly the list written from docs/ownership.md and docs/persistence.md. */
export async function dryRun(operationCase: OperationCase): Promise<void> {
  const dry = await preparedPlace(operationCase);
  const child = spawnSharedFixture(
    'crasher',
    crasherPlan(operationCase.operation, dry.place, dry.root),
    FIXTURE_MODULES,
  );
  const done = await messageOf(child, 'done');
  expect(await child.closed).toMatchObject({ code: 0, signal: null });
  const steps = messagesOf(child, 'step').map((message) => shownStep(message, dry.place, dry.root));
  expect(steps).toEqual(operationCase.expectedSteps);
  expect(done.steps).toBe(operationCase.expectedSteps.length);
}

/** What one crash point showed, for the record. */
export interface Judgement {
  /** Which writer met the state first: the same root's (b), or another workspace's (c). */
  readonly order?: 'same root first' | 'other first';
  /** Whether the dead writer left its registry lock (taken over by the next writer). */
  readonly lockLeft: boolean;
  readonly fences: number;
  readonly status: string;
  /** The same-root acquire of this process: `won`, or the refusal code. */
  readonly acquire: string;
}

const registryLockOf = (place: TestPlace) => handPlaces(place.stateHome, '/').registryLock;
const isLockOrMarker = (path: string) => /^v1\/registry\/(registry|takeover-[0-9a-f-]+)\.lock$/.test(path);

/** The listing outside staging without the registry lock and take-over markers (a dead writer's are taken over and removed). */
function listingWithoutLocks(stateHome: string): Record<string, ListedEntry> {
  return Object.fromEntries(Object.entries(listingOutsideStaging(stateHome)).filter(([path]) => !isLockOrMarker(path)));
}

/**
 * (a): `inspect` (of a new coordination in this process) never answers `absent` or `stopped`
 * while a service fence remains; a file that does not decode makes it `unavailable`; staging
 * leftovers are only ever a dead writer's. Answers the fences and the status.
 */
function checkInspect(
  prepared: Prepared,
  deadPids: readonly number[],
  label: string,
): { fences: string[]; status: string } {
  const { place, root } = prepared;
  const fences = serviceFences(place.stateHome, root);
  const inspection = inspectWorkspace(openWorkspace(root, { stateHome: place.stateHome }));
  if (fences.length > 0)
    expect(['absent', 'stopped'], `${label}: fences ${fences.join(', ')}`).not.toContain(inspection.status);
  const problems = undecodableFiles(place.stateHome);
  if (problems.length > 0) expect(inspection.status, `${label}: ${problems.join(', ')}`).toBe('unavailable');
  for (const leftover of stagingLeftovers(place.stateHome))
    expect(deadPids, `${label}: ${leftover}`).toContain(Number(leftover.split('.')[0]));
  return { fences, status: inspection.status };
}

/**
 * (b): this process (another process than the dead writer) acquires the same root. With a fence
 * left it is refused and changes nothing but the dead writer's lock and staging leftovers, which
 * every transaction takes over and sweeps; with none it succeeds, and is released.
 */
async function checkAcquire(prepared: Prepared, label: string): Promise<string> {
  const { place, root } = prepared;
  const fences = serviceFences(place.stateHome, root);
  const coordination = openWorkspace(root, { stateHome: place.stateHome, lockWaitMs: 1000 });
  const before = listingWithoutLocks(place.stateHome);
  let lease: FileLease | undefined;
  const code = await codeOfAsync(
    acquireWorkspace(coordination, OWNER_CONFIG, PARENT_ENDPOINT).then((acquired) => {
      lease = acquired;
    }),
  );
  expect(pathExists(registryLockOf(place)), `${label}: a registry lock outlived the acquire`).toBe(false);
  if (fences.length > 0) {
    expect(REFUSALS, `${label}: fences ${fences.join(', ')}`).toContain(code);
    expect(listingOutsideStaging(place.stateHome), `${label}: the refused acquire changed the state`).toEqual(before);
    expect(stagingLeftovers(place.stateHome), label).toEqual([]);
    return code;
  }
  expect(code, `${label}: no fence is left`).toBe('no error');
  expect(inspectWorkspace(coordination), label).toMatchObject({
    status: 'unavailable',
    owner: { pid: process.pid, endpoint: PARENT_ENDPOINT },
  });
  await lease!.release();
  expect(inspectWorkspace(coordination), label).toMatchObject({ status: 'stopped', epoch: lease!.registration.epoch });
  expect(serviceFences(place.stateHome, root), label).toEqual([]);
  return 'won';
}

/**
 * (c): a writer of another workspace of the same state home runs a full acquire and release,
 * taking over the dead writer's registry lock if one was left, and changes no fence of the root.
 */
async function checkOtherWorkspace(prepared: Prepared, label: string): Promise<void> {
  const { place, root, otherRoot } = prepared;
  const fences = serviceFences(place.stateHome, root);
  const other = openWorkspace(otherRoot, { stateHome: place.stateHome, lockWaitMs: 1000 });
  const lease = await acquireWorkspace(other, OWNER_CONFIG, OTHER_ENDPOINT);
  expect(inspectWorkspace(other), label).toMatchObject({
    status: 'unavailable',
    owner: { pid: process.pid, endpoint: OTHER_ENDPOINT, phase: 'idle' },
  });
  await lease.release();
  expect(inspectWorkspace(other), label).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
  expect(serviceFences(place.stateHome, otherRoot), label).toEqual([]);
  expect(
    serviceFences(place.stateHome, root),
    `${label}: another workspace's writer changed this root's fences`,
  ).toEqual(fences);
  expect(pathExists(registryLockOf(place)), `${label}: the dead writer's registry lock was not taken over`).toBe(false);
  expect(
    namesIn(join(handPlaces(place.stateHome, '/').namespace, 'registry')).filter((name) =>
      name.startsWith('takeover-'),
    ),
    label,
  ).toEqual([]);
}

/**
 * Judges the state a dead writer left: (a), (b), (c), (a), (b); or, with `other first`, (a), (c),
 * (a), (b), so that the other workspace's writer is the one that meets a dead lock (docs/ownership.md, "The registry transaction", step 1).
 */
export async function judge(
  prepared: Prepared,
  deadPids: readonly number[],
  order: 'other first' | 'same root first',
  label: string,
): Promise<Judgement> {
  const lockLeft = pathExists(registryLockOf(prepared.place));
  const first = checkInspect(prepared, deadPids, `${label} (as left)`);
  const acquires: string[] = [];
  if (order === 'same root first') acquires.push(await checkAcquire(prepared, `${label} (as left)`));
  await checkOtherWorkspace(prepared, label);
  checkInspect(prepared, deadPids, `${label} (after another workspace's writer)`);
  acquires.push(await checkAcquire(prepared, `${label} (after another workspace's writer)`));
  return { lockLeft, fences: first.fences.length, status: first.status, acquire: acquires[0]! };
}

export function summary(judgements: readonly Judgement[]) {
  return {
    'inspect as left': countsOf(judgements.map((j) => j.status)),
    'same-root acquire': countsOf(judgements.map((j) => j.acquire)),
    'with a fence': judgements.filter((j) => j.fences > 0).length,
    'registry lock left, taken over by the same root': judgements.filter((j) => j.lockLeft && j.order !== 'other first')
      .length,
    'registry lock left, taken over by another workspace': judgements.filter(
      (j) => j.lockLeft && j.order === 'other first',
    ).length,
  };
}

/** Step `n` as the child reported it, with its real path (the injected error's message names it). */
export function reportedRaw(child: Parameters<typeof messagesOf>[0], n: number): string {
  const step = messagesOf(child, 'step').map(
    (message) => message.step as { n: number; operation: string; action: string; path: string },
  )[n - 1]!;
  return `${step.operation} ${step.action} ${step.path}`;
}
