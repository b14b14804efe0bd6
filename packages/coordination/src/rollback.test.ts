import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { PrivateFilesHooks } from '@leasehold/private-files';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  bytesOf,
  cleanUp,
  codeOf,
  codeOfAsync,
  countsOf,
  handPlaces,
  listingOutsideStaging,
  loopbackEndpoint,
  makePlace,
  makeWorkspace,
  messageOf,
  namesIn,
  pathExists,
  replaceFile,
  serviceFences,
  sha256Hex,
  shownStep,
  spawnPlanned,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  ACQUIRE_FRESH_WITH_HOST_CONFIG_STEPS,
  ACQUIRE_OVER_STOPPED_STEPS,
  LOCK_REMOVAL_STEPS,
  REGISTRY,
  RELEASE_ABSORBED,
  RELEASE_STEPS,
  contentListing,
  injectedError,
} from '../test/crash-helpers.js';
import { goneHolder, registryLockBytes } from '../test/functional-helpers.js';
import { OWNER_CONFIG, PROCESS_FIXTURES, stagingLeftovers } from '../test/process-helpers.js';
import {
  acquireWorkspace,
  initializeWorkspace,
  inspectWorkspace,
  openWorkspace,
  workspaceLocalAccess,
  type NewWorkspace,
  type FileLease,
  type Workspace,
} from './index.js';

afterEach(cleanUp);

// A failure after the reservation rolls back what this call wrote (docs/ownership.md, "Rollback of a failed acquire"),
// in reverse order, each step a compare-and-swap against its own snapshot,
// ending with `unreserve`; a rollback step that fails leaves the rest as a
// visible fence. Here in one process (this one, which stays alive): one I/O
// error (EIO) at each mutating step of acquire, then the same process acquires
// again; a failing undo; a release that failed part-way, called again.

const ENDPOINT = loopbackEndpoint(44_101);
const CHILD_ENDPOINT = loopbackEndpoint(44_102);
const PREPARE_ENDPOINT = loopbackEndpoint(44_100);
/** The policy document whose identity OWNER_CONFIG names. */
const POLICY = bytesOf('leasehold process tests: policy');

/** A staged temp discarded after a failure, or a staged folder removed: best-effort cleanup, not an undo. */
const isStagingCleanup = (step: string) => /^\S+ (unlink|rmdir) state\/v1\/\.staging\//.test(step);

/**
 * A beforeMutation hook that, while armed, records every step (shown as in the step lists) and
 * throws an injected EIO at step `failAt` only; with `thenFirstUndo`, also at the first step after
 * it that is not a best-effort staging cleanup (the first step of the rollback).
 */
class Injector {
  readonly hooks: PrivateFilesHooks = { beforeMutation: (step) => this.#before(step) };
  readonly steps: string[] = [];
  readonly injected: Error[] = [];
  /** The step of the rollback that was made to fail, with `thenFirstUndo`. */
  firstUndo: string | undefined;
  readonly #place: TestPlace;
  readonly #root: string;
  #armed = false;
  #failAt: number | undefined;
  #thenFirstUndo = false;

  constructor(place: TestPlace, root: string) {
    this.#place = place;
    this.#root = root;
  }

  arm(failAt?: number, thenFirstUndo = false): void {
    this.steps.length = 0;
    this.injected.length = 0;
    this.firstUndo = undefined;
    this.#armed = true;
    this.#failAt = failAt;
    this.#thenFirstUndo = thenFirstUndo;
  }

  disarm(): void {
    this.#armed = false;
  }

  #before(step: { operation: string; action: string; path: string }): void {
    if (!this.#armed) return;
    const shown = shownStep({ step }, this.#place, this.#root);
    this.steps.push(shown);
    const n = this.steps.length;
    if (this.#failAt === undefined || n < this.#failAt) return;
    if (n === this.#failAt || (this.#thenFirstUndo && this.firstUndo === undefined && !isStagingCleanup(shown))) {
      if (n > this.#failAt) this.firstUndo = shown;
      const error = injectedError('EIO', shown);
      this.injected.push(error);
      throw error;
    }
  }
}

interface Setup {
  readonly place: TestPlace;
  readonly root: string;
  readonly injector: Injector;
  /** This process's coordination, with the injector's hooks. */
  readonly coordination: Workspace;
  /** The epoch of the stopped registration the acquire starts from, or null for a fresh workspace. */
  readonly stoppedEpoch: string | null;
  /** How often initializeNew was called. */
  initializeCalls: number;
}

interface AcquireCase {
  readonly name: string;
  readonly stopped: boolean;
  readonly expectedSteps: readonly string[];
}

const ACQUIRE_CASES: readonly AcquireCase[] = [
  {
    name: 'acquire of a fresh workspace (initializeNew writes host-config.json)',
    stopped: false,
    expectedSteps: ACQUIRE_FRESH_WITH_HOST_CONFIG_STEPS,
  },
  { name: 'acquire over a stopped registration', stopped: true, expectedSteps: ACQUIRE_OVER_STOPPED_STEPS },
];

/** A fresh place (a fresh state home), and for `stopped` a workspace acquired and released once. */
async function setUp(stopped: boolean): Promise<Setup> {
  const place = makePlace('process');
  const root = makeWorkspace(place, 'workspace');
  const injector = new Injector(place, root);
  // A live holder is never expected: a short wait makes a lock this process left fail fast.
  const coordination = openWorkspace(root, { stateHome: place.stateHome, hooks: injector.hooks, lockWaitMs: 500 });
  let stoppedEpoch: string | null = null;
  if (stopped) {
    const lease = await acquireWorkspace(coordination, OWNER_CONFIG, PREPARE_ENDPOINT);
    await lease.release();
    stoppedEpoch = lease.registration.epoch;
  }
  return { place, root, injector, coordination, stoppedEpoch, initializeCalls: 0 };
}

function acquireOf(setup: Setup): Promise<FileLease> {
  return acquireWorkspace(setup.coordination, OWNER_CONFIG, ENDPOINT, (workspace: NewWorkspace) => {
    setup.initializeCalls += 1;
    workspace.writeHostConfig(POLICY);
  });
}

/** What an attempt came to: the lease, or the error it rejected with. */
async function settled<T>(promise: Promise<T>): Promise<{ value: T } | { error: unknown }> {
  try {
    return { value: await promise };
  } catch (error) {
    return { error };
  }
}

/**
 * No fence and no stray file: nothing of the acquire is left but what existed before. A fresh
 * state home keeps what a transaction initialises (the folders, an empty table) and the
 * workspace's empty private root; its service folder is removed. `localAccess` is unavailable
 * and `inspect` shows no idle owner of this process: no rejected call leaves a complete ownership.
 */
function expectRolledBack(setup: Setup, before: Record<string, string>, label: string): void {
  const { place, root, coordination, stoppedEpoch } = setup;
  expect(serviceFences(place.stateHome, root), label).toEqual([]);
  expect(inspectWorkspace(coordination), label).toEqual(
    stoppedEpoch === null ? { status: 'absent' } : { status: 'stopped', epoch: stoppedEpoch, version: 2 },
  );
  expect(
    codeOf(() => workspaceLocalAccess(coordination)),
    label,
  ).toBe('unavailable');
  const after = contentListing(place.stateHome);
  const privateRoot = `v1/workspaces/${handPlaces(place.stateHome, root).privateRootName}`;
  const initialised = ['v1', 'v1/registry', 'v1/workspaces', privateRoot];
  for (const [path, content] of Object.entries(after)) {
    if (path in before) expect(content, `${label}: ${path}`).toBe(before[path]);
    else if (path === 'v1/registry/format.json') continue;
    else if (path === 'v1/registry/roots.json')
      expect(JSON.parse(Buffer.from(content, 'hex').toString('utf8')), label).toMatchObject({ entries: [] });
    else expect(initialised, `${label}: a stray ${path}`).toContain(path);
    if (initialised.includes(path)) expect(content, `${label}: ${path}`).toBe('folder');
  }
  for (const path of Object.keys(before)) expect(after, `${label}: ${path} is gone`).toHaveProperty([path]);
  expect(stagingLeftovers(place.stateHome), label).toEqual([]);
}

/** The same process acquires again (no injection), and releases. */
async function expectAcquiresAgain(setup: Setup, label: string): Promise<void> {
  const lease = await acquireOf(setup);
  expect(inspectWorkspace(setup.coordination), label).toMatchObject({
    status: 'unavailable',
    owner: { pid: process.pid, endpoint: ENDPOINT, phase: 'idle' },
  });
  await lease.release();
  expect(inspectWorkspace(setup.coordination), label).toMatchObject({
    status: 'stopped',
    epoch: lease.registration.epoch,
  });
  expect(serviceFences(setup.place.stateHome, setup.root), label).toEqual([]);
  expect(
    namesIn(join(setup.place.stateHome, 'v1', 'registry')).filter((name) => name.endsWith('.lock')),
    `${label}: a lock or marker left`,
  ).toEqual([]);
}

/** The steps of one whole acquire, as the hook reports them; it must be exactly the list written from docs/ownership.md ("Acquire"). */
async function dryRun(acquireCase: AcquireCase): Promise<void> {
  const setup = await setUp(acquireCase.stopped);
  setup.injector.arm();
  const lease = await acquireOf(setup);
  setup.injector.disarm();
  expect(setup.injector.steps).toEqual(acquireCase.expectedSteps);
  expect(setup.initializeCalls).toBe(acquireCase.stopped ? 0 : 1);
  await lease.release();
}

describe('acquire rolls back when one step fails with an I/O error (docs/ownership.md, "Rollback of a failed acquire")', () => {
  it('uses the policy document the config names', () => {
    expect(sha256Hex(POLICY)).toBe(OWNER_CONFIG.policyIdentity);
  });

  // One test per step (each a fresh place); the dry run, which proves each step list, is a test of its own.
  for (const acquireCase of ACQUIRE_CASES) {
    describe(acquireCase.name, () => {
      const outcomes: string[] = [];
      afterAll(() => console.log(`${acquireCase.name}: ${outcomes.length} I/O-error points`, countsOf(outcomes)));

      it('the dry run reports exactly the steps written from docs/ownership.md', () => dryRun(acquireCase));

      for (const [index, step] of acquireCase.expectedSteps.entries()) {
        const failAt = index + 1;
        it(`an EIO at step ${failAt}: ${step}, then the same process acquires`, async () => {
          const label = `${acquireCase.name}, EIO at step ${failAt}: ${step}`;
          const setup = await setUp(acquireCase.stopped);
          const before = contentListing(setup.place.stateHome);
          setup.injector.arm(failAt);
          const result = await settled(acquireOf(setup));
          setup.injector.disarm();
          expect(setup.injector.injected, label).toHaveLength(1);
          expect(setup.injector.steps.slice(0, failAt), label).toEqual(acquireCase.expectedSteps.slice(0, failAt));
          if (LOCK_REMOVAL_STEPS.includes(step)) {
            // A failed removal of the registry lock leaves it (naming this live process), and the
            // transaction's work stands: the acquire goes on (docs/ownership.md, "The registry transaction", step 5).
            expect(result, label).toHaveProperty('value');
            const lease = (result as { value: FileLease }).value;
            lease.assert();
            await lease.release();
            expect(serviceFences(setup.place.stateHome, setup.root), label).toEqual([]);
            expect(pathExists(handPlaces(setup.place.stateHome, '/').registryLock), label).toBe(false);
            outcomes.push('resolved (lock removal)');
          } else {
            expect(result, label).toEqual({ error: setup.injector.injected[0] });
            expectRolledBack(setup, before, label);
            outcomes.push('rejected, rolled back');
          }
          await expectAcquiresAgain(setup, label);
        });
      }
    });
  }

  it('an error thrown by initializeNew rolls back, before or after it wrote host-config.json', async () => {
    for (const writeFirst of [false, true]) {
      const label = writeFirst ? 'after host-config.json' : 'before host-config.json';
      const setup = await setUp(false);
      const failure = new Error('the service could not initialise');
      const attempt = acquireWorkspace(setup.coordination, OWNER_CONFIG, ENDPOINT, async (workspace) => {
        if (writeFirst) workspace.writeHostConfig(POLICY);
        expect(pathExists(handPlaces(setup.place.stateHome, setup.root).service), label).toBe(true);
        throw failure;
      });
      await expect(attempt, label).rejects.toBe(failure);
      expectRolledBack(setup, {}, label);
      expect(pathExists(handPlaces(setup.place.stateHome, setup.root).service), label).toBe(false);
      await expectAcquiresAgain(setup, label);
    }
  });
});

describe('a rollback step that fails leaves the rest fenced (docs/ownership.md, "Rollback of a failed acquire")', () => {
  for (const acquireCase of ACQUIRE_CASES) {
    describe(acquireCase.name, () => {
      const steps = acquireCase.expectedSteps;
      // From the reservation's folder fsync on, the row is on disk: every later failure has something to undo.
      const first = steps.indexOf(`replace fsync-directory ${REGISTRY}`) + 1;
      // The registration is the last write (created: 5 steps; replaced: 4).
      const registrationFrom = steps.length - (acquireCase.stopped ? 4 : 5);
      const firstUndos: string[] = [];
      let completeOwnerships = 0;
      afterAll(() =>
        console.log(`${acquireCase.name}: ${firstUndos.length} double-fault points`, {
          'first undo step failed': countsOf(firstUndos),
          'completed as a whole ownership (resolved with its lease)': completeOwnerships,
        }),
      );

      // Absorbed failures (the registry lock's removal) have nothing to roll back.
      const points = steps
        .map((step, index) => ({ step, failAt: index + 1 }))
        .filter(({ step, failAt }) => failAt >= first && !LOCK_REMOVAL_STEPS.includes(step));
      for (const { step, failAt } of points) {
        it(`an EIO at step ${failAt}: ${step}, and at the first undo step`, async () => {
          const label = `${acquireCase.name}, EIO at step ${failAt}: ${step}, and at the first undo step`;
          const setup = await setUp(acquireCase.stopped);
          setup.injector.arm(failAt, true);
          const result = await settled(acquireOf(setup));
          setup.injector.disarm();
          expect(setup.injector.steps.slice(0, failAt), label).toEqual(steps.slice(0, failAt));
          expect(setup.injector.firstUndo, label).toBeDefined();
          firstUndos.push(setup.injector.firstUndo!.replace(/ .*\//, ' …/'));
          // Fenced by the row, which names this live process: inspect is neither absent nor stopped.
          const fences = serviceFences(setup.place.stateHome, setup.root);
          expect(fences, label).toContain('registry row');
          expect(['absent', 'stopped'], label).not.toContain(inspectWorkspace(setup.coordination).status);
          if ('value' in result) {
            // The registration was published and its own undo failed: what is left is the whole
            // ownership, so the call completed and said so (it never rejects over an owner nobody holds).
            expect(failAt, label).toBeGreaterThan(registrationFrom);
            expect(
              codeOf(() => result.value.assert()),
              label,
            ).toBe('no error');
            expect(workspaceLocalAccess(setup.coordination).epoch, label).toBe(result.value.registration.epoch);
            completeOwnerships += 1;
          } else {
            expect(result, label).toEqual({ error: setup.injector.injected[0] });
            // A rejected acquire left no ownership anyone could reach.
            expect(
              codeOf(() => workspaceLocalAccess(setup.coordination)),
              label,
            ).toBe('unavailable');
          }
          // Another process's acquire is refused, and changes nothing.
          const listed = listingOutsideStaging(setup.place.stateHome);
          const child = spawnPlanned(PROCESS_FIXTURES, 'acquirer.mjs', {
            workspace: setup.root,
            stateHome: setup.place.stateHome,
            config: OWNER_CONFIG,
            endpoint: CHILD_ENDPOINT,
          });
          expect(await messageOf(child, 'acquire'), label).toMatchObject({ acquire: 'conflict' });
          expect(await child.closed, label).toMatchObject({ code: 0 });
          expect(listingOutsideStaging(setup.place.stateHome), label).toEqual(listed);
        });
      }
    });
  }
});

describe('a release that failed part-way is finished by calling it again (docs/ownership.md, "Release")', () => {
  const outcomes: string[] = [];
  afterAll(() => console.log(`release: ${outcomes.length} I/O-error points`, countsOf(outcomes)));

  it('the dry run reports exactly the steps written from docs/ownership.md', async () => {
    const dry = await setUp(false);
    const dryLease = await acquireWorkspace(dry.coordination, OWNER_CONFIG, ENDPOINT);
    dry.injector.arm();
    await dryLease.release();
    dry.injector.disarm();
    expect(dry.injector.steps).toEqual(RELEASE_STEPS);
  });

  for (const [index, step] of RELEASE_STEPS.entries()) {
    const failAt = index + 1;
    it(`an EIO at step ${failAt}: ${step}, then release again, then acquire`, async () => {
      const label = `release, EIO at step ${failAt}: ${step}`;
      const setup = await setUp(false);
      const lease = await acquireWorkspace(setup.coordination, OWNER_CONFIG, ENDPOINT);
      setup.injector.arm(failAt);
      const result = await settled(lease.release());
      setup.injector.disarm();
      expect(setup.injector.injected, label).toHaveLength(1);
      expect(setup.injector.steps.slice(0, failAt), label).toEqual(RELEASE_STEPS.slice(0, failAt));
      if (RELEASE_ABSORBED.includes(step)) {
        // The write or removal went through, only its folder fsync failed (or the lock stayed): done.
        expect(result, label).toEqual({ value: undefined });
        outcomes.push('resolved');
      } else {
        expect(result, label).toEqual({ error: setup.injector.injected[0] });
        expect(['absent', 'stopped'], label).not.toContain(inspectWorkspace(setup.coordination).status);
        expect(serviceFences(setup.place.stateHome, setup.root).length, label).toBeGreaterThan(0);
        await lease.release();
        outcomes.push('rejected, finished by the second call');
      }
      expect(serviceFences(setup.place.stateHome, setup.root), label).toEqual([]);
      expect(inspectWorkspace(setup.coordination), label).toEqual({
        status: 'stopped',
        epoch: lease.registration.epoch,
        // Acquired, then released from idle: one write each, however many calls the release took.
        version: 2,
      });
      expect(
        codeOf(() => lease.assert()),
        label,
      ).toBe('unavailable');
      await expectAcquiresAgain(setup, label);
    });
  }
});

describe('a rollback inside a transaction that lost the registry lock (docs/ownership.md, "Rollback of a failed acquire")', () => {
  it('never removes a service folder another process published with the same bytes: conflict, and that folder and lock stay', async () => {
    const place = makePlace('process');
    const root = makeWorkspace(place, 'workspace');
    const places = handPlaces(place.stateHome, root);
    // The folder this acquire would publish (a new workspace's carries no random token), then the workspace new again.
    await initializeWorkspace(openWorkspace(root, { stateHome: place.stateHome }), OWNER_CONFIG);
    const published = { 'format.json': readFileSync(places.format), 'config.json': readFileSync(places.config) };
    rmSync(places.service, { recursive: true });
    const foreignLock = registryLockBytes(goneHolder(), '/srv/other');
    let armed = true;
    const hooks: PrivateFilesHooks = {
      beforeMutation(step) {
        // The row's swap is on disk: before the service folder's publication, another process takes the
        // registry lock over (judging this one gone) and publishes the same folder.
        if (
          !armed ||
          step.operation !== 'replace' ||
          step.action !== 'fsync-directory' ||
          step.path !== dirname(places.roots)
        )
          return;
        armed = false;
        replaceFile(place.base, places.registryLock, foreignLock);
        mkdirSync(places.service, { mode: 0o700 });
        for (const [name, bytes] of Object.entries(published))
          writeFileSync(join(places.service, name), bytes, { mode: 0o600, flag: 'wx' });
      },
    };
    const coordination = openWorkspace(root, { stateHome: place.stateHome, hooks, lockWaitMs: 500 });
    expect(await codeOfAsync(acquireWorkspace(coordination, OWNER_CONFIG, ENDPOINT))).toBe('conflict');
    expect(armed).toBe(false);
    expect(namesIn(places.service)).toEqual(['config.json', 'format.json']);
    for (const [name, bytes] of Object.entries(published))
      expect(readFileSync(join(places.service, name))).toEqual(bytes);
    expect(readFileSync(places.registryLock)).toEqual(Buffer.from(foreignLock));
  });
});
