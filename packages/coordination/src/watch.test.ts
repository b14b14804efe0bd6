import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  killAndReap,
  loopbackEndpoint,
  makePlace,
  makeWorkspace,
  messageOf,
  messagesOf,
  pathExists,
  type TestPlace,
} from '@leasehold/test-utils';
import { OWNER_CONFIG, spawnCyclers, steppedOwner } from '../test/process-helpers.js';
import type { WatchOptions, WatchSnapshot } from '@leasehold/contracts';
import { fileOwnership, type Ownership } from './index.js';

afterEach(cleanUp);

/** No poll within a test's life: only notifications read (the subject where no resync may come). */
const NO_POLL = 3_600_000;
const CHURNERS = 8;
const ITERATIONS = 10;

/** A watch of `root` read one snapshot at a time, ended (its notifications and timer let go) by `stop`. */
interface Watching {
  readonly next: () => Promise<WatchSnapshot>;
  /** Snapshots until (and with) the first that `wanted` accepts. */
  readonly until: (wanted: (snapshot: WatchSnapshot) => boolean) => Promise<WatchSnapshot[]>;
  readonly stop: () => void;
}

function watching(ownership: Ownership, root: string, options: WatchOptions = {}): Watching {
  const controller = new AbortController();
  const iterator = ownership.watch(root, { ...options, signal: controller.signal })[Symbol.asyncIterator]();
  const next = async (): Promise<WatchSnapshot> => {
    const result = await iterator.next();
    if (result.done === true) throw new Error('the watch ended');
    return result.value;
  };
  return {
    next,
    async until(wanted) {
      const seen: WatchSnapshot[] = [];
      for (;;) {
        const snapshot = await next();
        seen.push(snapshot);
        if (wanted(snapshot)) return seen;
      }
    },
    stop: () => controller.abort(),
  };
}

/** A settled state (not a passing one between two steps of an acquire or a release). */
const settled = (snapshot: WatchSnapshot): boolean => snapshot.inProgress !== true;
const liveIdle = (snapshot: WatchSnapshot): boolean =>
  settled(snapshot) && snapshot.phase === 'idle' && snapshot.owner?.process === 'live';

/** What a snapshot says, short: its status, phase and verdict on the owner's process. */
function shapeOf(snapshot: WatchSnapshot): string {
  return [snapshot.status, snapshot.phase, snapshot.owner?.process].filter((part) => part !== undefined).join(' ');
}

/** Sets the state home up (an owner of another root acquires and releases), so that every folder above the roots exists. */
async function stateHomeMade(place: TestPlace, ownership: Ownership, port: number): Promise<void> {
  const lease = await ownership.acquire(makeWorkspace(place, 'first'), OWNER_CONFIG, {
    boundEndpoint: loopbackEndpoint(port),
  });
  await lease.release();
}

describe('fileOwnership: watch', () => {
  it("sees the folder owned through another state home, and free again, by the folder's own mark", async () => {
    const place = makePlace('coordination');
    const here = fileOwnership({ stateHome: place.stateHome });
    const there = fileOwnership({ stateHome: `${place.base}/other-state` });
    await stateHomeMade(place, here, 44_190);
    const root = makeWorkspace(place, 'marked');
    const watch = watching(here, root, { pollMs: NO_POLL });
    expect(await watch.next()).toEqual({ seq: 1, status: 'absent' });
    const lease = await there.acquire(root, OWNER_CONFIG, { boundEndpoint: loopbackEndpoint(44_191) });
    const owned = await watch.until((snapshot) => snapshot.marked !== undefined);
    expect(owned.at(-1)).toMatchObject({
      status: 'unavailable',
      marked: { root, stateHome: `${place.base}/other-state`, epoch: lease.owner.epoch, process: 'live' },
    });
    await lease.release();
    expect((await watch.until((snapshot) => snapshot.status === 'absent')).at(-1)?.resync).toBeUndefined();
    watch.stop();
  });

  it(`sees an owner in another process acquire, stop and release, in order and with no resync, while ${CHURNERS} others churn`, async () => {
    const place = makePlace('coordination');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    await stateHomeMade(place, ownership, 44_100);
    const root = makeWorkspace(place, 'watched');
    const watch = watching(ownership, root, { pollMs: NO_POLL });
    expect(await watch.next()).toEqual({ seq: 1, status: 'absent' });

    const churners = spawnCyclers(place, CHURNERS, 'churn', 44_111, ITERATIONS);
    await Promise.all(churners.map((churner) => messageOf(churner, 'ready')));
    for (const churner of churners) churner.send('go');
    // Every churner is busy with its own workspace (and the registry) while the owner moves.
    await Promise.all(churners.map((churner) => messageOf(churner, 'iteration')));

    const owner = steppedOwner(place, root, 44_101);
    const epoch = (await messageOf(owner, 'acquired')).acquired;
    const acquired = await watch.until(liveIdle);
    owner.send('stopping');
    await messageOf(owner, 'stopping');
    const stopping = await watch.until((snapshot) => snapshot.status === 'stopping');
    owner.send('release');
    await messageOf(owner, 'released');
    const stopped = await watch.until((snapshot) => snapshot.status === 'stopped');
    watch.stop();
    const seen = [...acquired, ...stopping, ...stopped];
    console.log(`the watch delivered ${seen.length + 1} snapshots: absent, ${seen.map(shapeOf).join(', ')}`);

    expect(await owner.closed).toMatchObject({ code: 0, signal: null });
    const ends = await Promise.all(churners.map((churner) => churner.closed));
    for (const [index, end] of ends.entries()) {
      expect(end, end.stderr).toMatchObject({ code: 0, signal: null });
      expect(messagesOf(churners[index]!, 'iteration')).toHaveLength(ITERATIONS);
    }
    // One number per change, none skipped, none marked: every notification came and was read.
    expect(seen.map((snapshot) => snapshot.seq)).toEqual(seen.map((_, index) => index + 2));
    expect(seen.filter((snapshot) => snapshot.resync === true)).toEqual([]);
    // The settled states, in order; between them only passing ones (a step of acquire or release).
    expect(seen.filter(settled).map(shapeOf)).toEqual([
      'unavailable idle live',
      'stopping stopping live',
      'stopped stopped',
    ]);
    expect(acquired.at(-1)).toMatchObject({ epoch, owner: { pid: owner.pid, epoch } });
    expect(stopping.at(-1)).toMatchObject({ epoch, owner: { pid: owner.pid } });
    // The registration's version counts its writes: acquired, stopping, stopped.
    expect(stopped.at(-1)).toEqual({ seq: seen.length + 1, status: 'stopped', epoch, phase: 'stopped', version: 3 });
  });

  it('sees an owner killed with SIGKILL as absent, found by the poll and not marked resync: no file changed', async () => {
    const place = makePlace('coordination');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    await stateHomeMade(place, ownership, 44_200);
    const root = makeWorkspace(place, 'killed');
    const watch = watching(ownership, root, { pollMs: 20 });
    const owner = steppedOwner(place, root, 44_201);
    const epoch = (await messageOf(owner, 'acquired')).acquired;
    const live = (await watch.until(liveIdle)).at(-1)!;
    expect(live).toMatchObject({ status: 'unavailable', epoch, owner: { pid: owner.pid, process: 'live' } });

    await killAndReap(owner);
    const after = await watch.until((snapshot) => snapshot.owner?.process === 'absent');
    watch.stop();
    // Only the verdict on its process changed: the very next snapshot, the files as they were.
    // (The acquire's own snapshots may be a resync: the poll is fast here and may find a change first.)
    expect(after).toEqual([
      {
        seq: live.seq + 1,
        status: 'unavailable',
        reason: live.reason,
        epoch,
        phase: 'idle',
        version: 1,
        owner: { ...live.owner, process: 'absent' },
      },
    ]);
  });

  it('gives a consumer that stalls while the owner changes the state now as a resync, not a lost change', async () => {
    const place = makePlace('coordination');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    await stateHomeMade(place, ownership, 44_300);
    const root = makeWorkspace(place, 'stalled');
    // The stalled consumer never asks until the end: its first snapshot fills its queue of one.
    const stalled = watching(ownership, root, { pollMs: NO_POLL, maxQueued: 1 });
    // A consumer that keeps up: it tells when the changes have been read.
    const witness = watching(ownership, root, { pollMs: NO_POLL });
    const owner = steppedOwner(place, root, 44_301);
    await messageOf(owner, 'acquired');
    owner.send('stopping');
    await messageOf(owner, 'stopping');
    owner.send('release');
    await messageOf(owner, 'released');
    const witnessed = await witness.until((snapshot) => snapshot.status === 'stopped');
    witness.stop();
    // The notification that woke the witness's read woke the stalled watch's too, in the same
    // turn of the event loop (both watch the same folders): once it has passed, both have read.
    await nextTurn();

    const delivered = await stalled.until((snapshot) => snapshot.status === 'stopped');
    stalled.stop();
    console.log(
      `the witness saw ${witnessed.map((snapshot) => `${snapshot.seq} ${shapeOf(snapshot)}`).join(', ')}; ` +
        `the stalled consumer ${delivered.map((snapshot) => `${snapshot.seq} ${shapeOf(snapshot)}${snapshot.resync === true ? ' (resync)' : ''}`).join(', ')}`,
    );
    expect(delivered[0]).toMatchObject({ resync: true });
    expect(delivered[0]!.seq).toBeGreaterThan(1);
    expect(delivered.at(-1)).toMatchObject({ status: 'stopped' });
    expect(delivered.length).toBeLessThan(witnessed.length);
    expect(await owner.closed).toMatchObject({ code: 0, signal: null });
  });

  it('sees a state home that did not exist when it began appear, announced by the folder above it', async () => {
    const place = makePlace('coordination');
    expect(pathExists(place.stateHome)).toBe(false);
    const ownership = fileOwnership({ stateHome: place.stateHome });
    const root = makeWorkspace(place, 'early');
    const watch = watching(ownership, root, { pollMs: NO_POLL });
    expect(await watch.next()).toEqual({ seq: 1, status: 'absent' });

    const lease = await ownership.acquire(root, OWNER_CONFIG, { boundEndpoint: loopbackEndpoint(44_400) });
    // The nearest folder above the state home is watched until the state home is made: each folder
    // below is announced by its parent, so nothing changed unseen.
    const appeared = await watch.until(liveIdle);
    expect(appeared.filter((snapshot) => snapshot.resync === true)).toEqual([]);
    expect(appeared.at(-1)).toMatchObject({ epoch: lease.owner.epoch, owner: { pid: process.pid } });
    // From then on its folders are watched: the release is announced.
    await lease.release();
    const released = await watch.until((snapshot) => snapshot.status === 'stopped');
    watch.stop();
    expect(released.filter((snapshot) => snapshot.resync === true)).toEqual([]);
    expect(released.at(-1)).toMatchObject({ status: 'stopped', epoch: lease.owner.epoch });
  });

  it('answers one unavailable snapshot for a root that is not absolute, and ends cleanly on abort', async () => {
    const place = makePlace('coordination');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    const controller = new AbortController();
    const watch = ownership.watch('relative/root', { signal: controller.signal, pollMs: 10 });
    const iterator = watch[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first).toMatchObject({ done: false, value: { seq: 1, status: 'unavailable' } });
    expect(first.value?.reason).toContain('workspace root: not an absolute');
    const waiting = iterator.next();
    controller.abort();
    expect(await waiting).toEqual({ value: undefined, done: true });
  });
});
