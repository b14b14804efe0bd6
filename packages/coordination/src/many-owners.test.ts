import { lstatSync } from 'node:fs';
import { posix } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { Registry } from '@leasehold/registry';
import {
  cleanUp,
  codeOf,
  codeOfAsync,
  countsOf,
  handPlaces,
  jsonOf,
  killAndReap,
  listingOutsideStaging,
  loopbackEndpoint,
  makePlace,
  makeWorkspace,
  messageOf,
  messagesOf,
  namesIn,
  pathExists,
  shownStep,
  spawnPlanned,
  type SpawnedChild,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  OWNER_CONFIG,
  PROCESS_FIXTURES,
  spawnCyclers,
  stagingLeftovers,
  stepAt,
  undecodableFiles,
  type StepperPlan,
} from '../test/process-helpers.js';
import {
  acquireWorkspace,
  inspectWorkspace,
  openWorkspace,
  workspaceLocalAccess,
  type Inspection,
  type FileLease,
  type Workspace,
} from './index.js';

afterEach(cleanUp);

const CYCLERS = 8;
const ITERATIONS = 20;
/** Reads made while a writer is provably inside its registry transaction (paused there, holding the lock). */
const READS_WHILE_HELD = 50;

/** The workspaces this process watches: one stopped, one never used, one it owns (idle). */
interface Readers {
  readonly stopped: Workspace;
  readonly stoppedEpoch: string;
  readonly never: Workspace;
  readonly held: Workspace;
  readonly lease: FileLease;
  readonly heldAnswer: Inspection;
}

async function readersIn(place: TestPlace): Promise<Readers> {
  const stopped = openWorkspace(makeWorkspace(place, 'stopped'), { stateHome: place.stateHome });
  const first = await acquireWorkspace(stopped, OWNER_CONFIG, loopbackEndpoint(45_000));
  await first.release();
  const never = openWorkspace(makeWorkspace(place, 'never'), { stateHome: place.stateHome });
  const held = openWorkspace(makeWorkspace(place, 'held'), { stateHome: place.stateHome, lockWaitMs: 60_000 });
  const lease = await acquireWorkspace(held, OWNER_CONFIG, loopbackEndpoint(45_001));
  const heldAnswer = inspectWorkspace(held);
  expect(heldAnswer).toMatchObject({
    status: 'unavailable',
    owner: { epoch: lease.registration.epoch, pid: process.pid, phase: 'idle' },
  });
  expect(inspectWorkspace(stopped)).toEqual({ status: 'stopped', epoch: first.registration.epoch, version: 2 });
  expect(inspectWorkspace(never)).toEqual({ status: 'absent' });
  return { stopped, stoppedEpoch: first.registration.epoch, never, held, lease, heldAnswer };
}

/** Every read of the watched workspaces, and whether a registry lock was there (by hand) as it began. */
interface Reads {
  count: number;
  withLockPresent: number;
  readonly stopped: Inspection[];
  readonly never: Inspection[];
  readonly held: Inspection[];
  readonly accessEpochs: string[];
  readonly thrown: unknown[];
}

function newReads(): Reads {
  return { count: 0, withLockPresent: 0, stopped: [], never: [], held: [], accessEpochs: [], thrown: [] };
}

/** One round of reads: inspect of each workspace, the owner's localAccess (as a client would) and its own assert. */
function readOnce(place: TestPlace, readers: Readers, reads: Reads): void {
  reads.count += 1;
  if (pathExists(handPlaces(place.stateHome, '/').registryLock)) reads.withLockPresent += 1;
  reads.stopped.push(inspectWorkspace(readers.stopped));
  reads.never.push(inspectWorkspace(readers.never));
  reads.held.push(inspectWorkspace(readers.held));
  try {
    reads.accessEpochs.push(workspaceLocalAccess(readers.held).epoch);
    readers.lease.assert();
  } catch (error) {
    reads.thrown.push(error);
  }
}

function expectTruthful(readers: Readers, reads: Reads): void {
  expect(reads.thrown).toEqual([]);
  expect(countsOf(reads.stopped.map((answer) => JSON.stringify(answer)))).toEqual({
    // Acquired, then released from idle: the registration's second write.
    [JSON.stringify({ status: 'stopped', epoch: readers.stoppedEpoch, version: 2 })]: reads.count,
  });
  expect(countsOf(reads.never.map((answer) => JSON.stringify(answer)))).toEqual({
    [JSON.stringify({ status: 'absent' })]: reads.count,
  });
  expect(countsOf(reads.held.map((answer) => JSON.stringify(answer)))).toEqual({
    [JSON.stringify(readers.heldAnswer)]: reads.count,
  });
  expect(reads.accessEpochs).toEqual(Array.from({ length: reads.count }, () => readers.lease.registration.epoch));
}

/** A stepper for `root` stopped (`then`) at the step `at` of its acquire, or the step after it. */
function stepper(
  place: TestPlace,
  root: string,
  at: string,
  then: 'kill' | 'pause',
  after: boolean | number = false,
): SpawnedChild {
  const plan: StepperPlan = {
    workspace: root,
    stateHome: place.stateHome,
    config: OWNER_CONFIG,
    endpoint: loopbackEndpoint(45_900),
    // Its release waits on the cyclers' transactions: a bound to catch a hang, not to time a busy machine.
    lockWaitMs: 60_000,
    during: 'acquire',
    at,
    after,
    then,
  };
  return spawnPlanned(PROCESS_FIXTURES, 'stepper.mjs', plan);
}

describe('many owners, one state home (docs/ownership.md, "Many owners in one state home")', () => {
  it(`a stopped workspace reads stopped on every inspect, and an idle owner's localAccess keeps working, while ${CYCLERS} processes cycle acquire and release on other workspaces`, async () => {
    const place = makePlace('process');
    const readers = await readersIn(place);
    const lost: unknown[] = [];
    const stopWatching = readers.lease.watch(5, (error) => lost.push(error));

    const cyclers = spawnCyclers(place, CYCLERS, 'cycler', 45_100, ITERATIONS);
    await Promise.all(cyclers.map((cycler) => messageOf(cycler, 'ready')));

    // First a writer provably inside its transaction: paused, holding the registry lock, just
    // before it swaps its row into roots.json. The cyclers start and queue behind it.
    const holderRoot = makeWorkspace(place, 'holder');
    const holder = stepper(
      place,
      holderRoot,
      stepAt('replace', 'rename', handPlaces(place.stateHome, '/').roots),
      'pause',
    );
    await messageOf(holder, 'at');
    const registry = new Registry(place.stateHome);
    const lockOfHolder = { verdict: 'live', lock: { pid: holder.pid, root: holderRoot } };
    expect(registry.readLock()).toMatchObject(lockOfHolder);
    let running = true;
    const ended = Promise.all([holder, ...cyclers].map((child) => child.closed)).then((ends) => {
      running = false;
      return ends;
    });
    for (const cycler of cyclers) cycler.send('go');

    const whileHeld = newReads();
    for (let read = 0; read < READS_WHILE_HELD; read += 1) {
      readOnce(place, readers, whileHeld);
      await nextTurn();
    }
    // Still the paused holder's lock: every one of those reads ran inside its transaction.
    expect(registry.readLock()).toMatchObject(lockOfHolder);
    expect(whileHeld.withLockPresent).toBe(READS_WHILE_HELD);

    // Then free churn: the holder goes on and releases, the cyclers run their cycles; the
    // readers loop until every writer has exited (a turn of the event loop between rounds lets
    // the exit events and the lease's watch timer run).
    holder.send('go');
    void messageOf(holder, 'acquired').then(() => holder.send('release'));
    const whileChurning = newReads();
    while (running) {
      readOnce(place, readers, whileChurning);
      await nextTurn();
    }
    const ends = await ended;
    stopWatching();
    console.log(
      `${whileHeld.count + whileChurning.count} reads of each workspace (${whileHeld.count} inside a paused writer's transaction, ` +
        `${whileChurning.count} while ${CYCLERS} processes ran ${ITERATIONS} acquire/release cycles each; ` +
        `${whileHeld.withLockPresent + whileChurning.withLockPresent} began with a registry lock present): stopped read`,
      countsOf(whileHeld.stopped.concat(whileChurning.stopped).map((answer) => answer.status)),
    );

    for (const end of ends) expect(end, end.stderr).toMatchObject({ code: 0, signal: null });
    expect(messagesOf(holder, 'released')).toHaveLength(1);
    for (const cycler of cyclers) expect(messagesOf(cycler, 'iteration')).toHaveLength(ITERATIONS);
    expectTruthful(readers, whileHeld);
    expectTruthful(readers, whileChurning);
    expect(lost).toEqual([]);

    expect(registry.readLock()).toBeUndefined();
    expect(registry.list().entries.map((entry) => entry.root)).toEqual([readers.held.root]);
    readers.lease.assert();
    await readers.lease.release();
    expect(inspectWorkspace(readers.held)).toMatchObject({
      status: 'stopped',
      epoch: readers.lease.registration.epoch,
    });
  });

  it('a writer paused inside its transaction holds other workspaces only for the lock wait; once it is killed, its lock is taken over at once', async () => {
    const place = makePlace('process');
    const readers = await readersIn(place);
    const crashedRoot = makeWorkspace(place, 'crashed');
    const holder = stepper(
      place,
      crashedRoot,
      stepAt('replace', 'rename', handPlaces(place.stateHome, '/').roots),
      'pause',
    );
    await messageOf(holder, 'at');
    const registry = new Registry(place.stateHome);
    expect(registry.readLock()).toMatchObject({ verdict: 'live', lock: { pid: holder.pid, root: crashedRoot } });

    // Live: other writers wait out their bound, then `busy`, writing nothing; readers never wait.
    const waiting = openWorkspace(makeWorkspace(place, 'waiting'), { stateHome: place.stateHome, lockWaitMs: 50 });
    const before = listingOutsideStaging(place.stateHome);
    expect(await codeOfAsync(() => acquireWorkspace(waiting, OWNER_CONFIG, loopbackEndpoint(45_002)))).toBe('busy');
    expect(listingOutsideStaging(place.stateHome)).toEqual(before);
    const reads = newReads();
    for (let read = 0; read < 5; read += 1) readOnce(place, readers, reads);
    expectTruthful(readers, reads);
    expect(inspectWorkspace(openWorkspace(crashedRoot, { stateHome: place.stateHome }))).toEqual({ status: 'absent' });

    // Dead: the next writer of any workspace takes the lock over without waiting at all.
    await killAndReap(holder);
    expect(registry.readLock()).toMatchObject({ verdict: 'absent', lock: { pid: holder.pid, root: crashedRoot } });
    const taker = openWorkspace(waiting.root, { stateHome: place.stateHome, lockWaitMs: 0 });
    const lease = await acquireWorkspace(taker, OWNER_CONFIG, loopbackEndpoint(45_002));
    lease.assert();
    expect(registry.readLock()).toBeUndefined();
    expect(registry.readMarkers()).toEqual([]);
    expect(stagingLeftovers(place.stateHome)).toEqual([]);
    expect(undecodableFiles(place.stateHome)).toEqual([]);
    // The killed writer had reserved nothing: its workspace is free.
    const again = await acquireWorkspace(
      openWorkspace(crashedRoot, { stateHome: place.stateHome }),
      OWNER_CONFIG,
      loopbackEndpoint(45_003),
    );
    await again.release();
    await lease.release();
    readers.lease.assert();
  });

  const KILLS: readonly {
    name: string;
    at: (lock: string) => string;
    after: boolean | number;
    killedAt: string;
    secondLink: boolean;
  }[] = [
    {
      name: 'linked, its staged temp still a second link of it',
      at: (lock) => stepAt('create', 'link', lock),
      after: true,
      killedAt: 'create unlink state/v1/.staging/<temp>',
      secondLink: true,
    },
    {
      // The lock has no folder fsync of its own (registry LOCK_PUBLISH): its create ends with the temp's unlink.
      name: 'whole, its temp unlinked, before the table is touched',
      at: (lock) => stepAt('create', 'link', lock),
      after: 2,
      killedAt: 'replace write state/v1/.staging/<temp>',
      secondLink: false,
    },
  ];

  for (const { name, at, after, killedAt, secondLink } of KILLS) {
    it(`a writer killed by its hook right after it created the registry lock (${name}) blocks no other workspace`, async () => {
      const place = makePlace('process');
      const readers = await readersIn(place);
      const places = handPlaces(place.stateHome, '/');
      const crashedRoot = makeWorkspace(place, 'crashed');
      const crashed = stepper(place, crashedRoot, at(places.registryLock), 'kill', after);
      const killed = await messageOf(crashed, 'at');
      expect(await crashed.closed).toMatchObject({ code: null, signal: 'SIGKILL' });
      expect(shownStep({ step: killed.at }, place, crashedRoot)).toBe(killedAt);

      const registry = new Registry(place.stateHome);
      // By hand: the lock names the dead writer and this transaction's root.
      expect(jsonOf(places.registryLock)).toMatchObject({ pid: crashed.pid, root: crashedRoot });
      expect(lstatSync(places.registryLock).nlink).toBe(secondLink ? 2 : 1);
      expect(stagingLeftovers(place.stateHome)).toHaveLength(secondLink ? 1 : 0);
      // Read as a lock, it is refused while it has a second link (a writer sweeps that link first), else its holder is absent.
      if (secondLink) expect(codeOf(() => registry.readLock())).toBe('refused');
      else
        expect(registry.readLock()).toMatchObject({ verdict: 'absent', lock: { pid: crashed.pid, root: crashedRoot } });
      expect(namesIn(posix.dirname(places.registryLock))).toEqual(['format.json', 'registry.lock', 'roots.json']);
      // The dead lock changes no read.
      const reads = newReads();
      for (let read = 0; read < 5; read += 1) readOnce(place, readers, reads);
      expectTruthful(readers, reads);

      // Another workspace's acquire takes it over without any wait, and removes it.
      const other = openWorkspace(makeWorkspace(place, 'other'), { stateHome: place.stateHome, lockWaitMs: 0 });
      const lease = await acquireWorkspace(other, OWNER_CONFIG, loopbackEndpoint(45_004));
      lease.assert();
      expect(registry.readLock()).toBeUndefined();
      expect(registry.readMarkers()).toEqual([]);
      expect(stagingLeftovers(place.stateHome)).toEqual([]);
      expect(undecodableFiles(place.stateHome)).toEqual([]);
      expect(
        registry
          .list()
          .entries.map((entry) => entry.root)
          .sort(),
      ).toEqual([readers.held.root, other.root].sort());

      // The killed writer had reserved nothing: its workspace reads absent and can be acquired.
      const crashedCoordination = openWorkspace(crashedRoot, { stateHome: place.stateHome });
      expect(inspectWorkspace(crashedCoordination)).toEqual({ status: 'absent' });
      await (await acquireWorkspace(crashedCoordination, OWNER_CONFIG, loopbackEndpoint(45_005))).release();
      await lease.release();
      readers.lease.assert();
    });
  }
});
