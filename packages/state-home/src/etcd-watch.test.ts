import { afterEach, describe, expect, it } from 'vitest';
import type { WatchSnapshot } from '@leasehold/contracts';
import type { EtcdBackend } from '@leasehold/etcd';
import {
  cleanUp,
  etcdAvailable,
  etcdctl,
  killAndReap,
  makeWorkspace,
  startEtcd,
  type EtcdCluster,
} from '@leasehold/test-utils';
import { BOUND, CONFIG, closeHosts, hostOf, placeOn, spawnOwner, type Place } from '../test/etcd-hosts.js';

// `watch(root)` of the etcd backend over each host's file backend, on a real etcd: woken by the
// root's etcd keys and by this host's files, a gap (an etcd stream lost) delivered as a resync.

afterEach(async () => {
  await closeHosts();
  await cleanUp();
});

/** A watch of `root` whose snapshots are taken as they come, until `stop` (its abort signal). */
interface Watching {
  /** Every snapshot so far, in order. */
  readonly seen: readonly WatchSnapshot[];
  /** The snapshots after the last `until`'s up to the first that matches, the match last (awaited until one comes). */
  until(matches: (snapshot: WatchSnapshot) => boolean): Promise<WatchSnapshot[]>;
  /** Aborts the watch and waits until its iteration ended. */
  stop(): Promise<void>;
}

function watching(backend: EtcdBackend, root: string): Watching {
  const abort = new AbortController();
  const seen: WatchSnapshot[] = [];
  let taken = 0;
  let ended = false;
  let arrived = (): void => {};
  const iteration = (async () => {
    for await (const snapshot of backend.watch(root, { signal: abort.signal })) {
      seen.push(snapshot);
      arrived();
    }
    ended = true;
    arrived();
  })();
  return {
    seen,
    async until(matches) {
      for (;;) {
        const found = seen.findIndex((snapshot, index) => index >= taken && matches(snapshot));
        if (found >= 0) {
          const answer = seen.slice(taken, found + 1);
          taken = found + 1;
          return answer;
        }
        if (ended) throw new Error(`the watch ended after ${JSON.stringify(seen)}`);
        await new Promise<void>((resolve) => {
          arrived = resolve;
        });
      }
    },
    async stop() {
      abort.abort();
      await iteration;
    },
  };
}

/** A snapshot of a passing state (between two steps of an acquire or release) or of a settled one. */
const settled = (snapshot: WatchSnapshot): boolean => snapshot.inProgress !== true;

/** The snapshot's status and, when it has one, its owner's phase and host. */
function shapeOf(snapshot: WatchSnapshot): string {
  return [snapshot.status, snapshot.phase].filter((part) => part !== undefined).join(' ');
}

/** What the member's `/metrics` says of its watches: its open watch streams and watchers. */
async function watchesOn(endpoint: string): Promise<{ streams: number; watchers: number }> {
  const metrics = await (await fetch(`${endpoint}/metrics`)).text();
  const gauge = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1] ?? NaN);
  return {
    streams: gauge('etcd_debugging_mvcc_watch_stream_total'),
    watchers: gauge('etcd_debugging_mvcc_watcher_total'),
  };
}

/** Polls `watchesOn` until it answers `expected` (the test's timeout bounds it). */
async function untilWatches(endpoint: string, expected: { streams: number; watchers: number }): Promise<void> {
  while (JSON.stringify(await watchesOn(endpoint)) !== JSON.stringify(expected))
    await new Promise((resolve) => setTimeout(resolve, 50));
}

/** The index of a member that is not the leader, once every member answers and all name the same leader. */
async function followerOf(cluster: EtcdCluster): Promise<number> {
  for (;;) {
    const statuses = await Promise.all(
      cluster.endpoints.map(async (endpoint) => {
        const response = await fetch(`${endpoint}/v3/maintenance/status`, { method: 'POST', body: '{}' });
        return (await response.json()) as { header: { member_id: string }; leader: string };
      }),
    );
    const leaders = new Set(statuses.map((status) => status.leader));
    const follower = statuses.findIndex((status) => status.header.member_id !== status.leader);
    if (leaders.size === 1 && !leaders.has('0') && follower >= 0) return follower;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The cluster's revision now, as etcdctl reads it. */
async function revisionOf(cluster: EtcdCluster, place: Place): Promise<string> {
  const answer = JSON.parse(await etcdctl(cluster, ['get', place.prefix, '-w', 'json'])) as {
    header: { revision: number | string };
  };
  return String(answer.header.revision);
}

describe.skipIf(!etcdAvailable('etcdctl'))('watch(root) of the etcd backend, on a real etcd', () => {
  it("sees this host's owner acquire, go stopping and release to stopped, in order, each without resync", async () => {
    const cluster = await startEtcd({ members: 1 });
    const place = placeOn(cluster);
    const root = makeWorkspace(place, 'own');
    const hostA = await hostOf(place, 'host-a');
    const watch = watching(hostA, root);
    const [first] = await watch.until(() => true);
    expect(first).toEqual({ seq: 1, status: 'absent' });

    const lease = await hostA.acquire(root, CONFIG, { boundEndpoint: BOUND });
    const epoch = lease.owner.epoch;
    const acquired = await watch.until((snapshot) => snapshot.phase === 'idle' && settled(snapshot));
    // Files never prove an idle owner live (the transport does): `unavailable`, with its owner.
    expect(acquired.at(-1)).toMatchObject({ status: 'unavailable', epoch, owner: { phase: 'idle' } });
    await lease.phase('stopping');
    const stopping = await watch.until((snapshot) => snapshot.status === 'stopping');
    expect(stopping.at(-1)).toMatchObject({ epoch, owner: { phase: 'stopping', process: 'live' } });
    await lease.release();
    const stopped = await watch.until((snapshot) => snapshot.status === 'stopped');
    expect(stopped.at(-1)).toMatchObject({ status: 'stopped', epoch });

    const seen = watch.seen;
    expect(seen.filter((snapshot) => snapshot.resync === true)).toEqual([]);
    expect(seen.map((snapshot) => snapshot.seq)).toEqual(seen.map((_, index) => index + 1));
    // `stopped` carries the phase of its record's last write, as any snapshot whose record's writes are counted.
    expect(seen.filter(settled).map(shapeOf)).toEqual([
      'absent',
      'unavailable idle',
      'stopping stopping',
      'stopped stopped',
    ]);
    await watch.stop();
  });

  it("sees another host's owner acquire, go stopping and release through etcd's keys alone, without resync", async () => {
    const cluster = await startEtcd({ members: 1 });
    const place = placeOn(cluster);
    const root = makeWorkspace(place, 'elsewhere');
    const [hostA, hostB] = await Promise.all([hostOf(place, 'host-a'), hostOf(place, 'host-b')]);
    // Host B's files never change: only the etcd keys of the root can announce host A's steps.
    const watch = watching(hostB, root);
    const [first] = await watch.until(() => true);
    expect(first).toEqual({ seq: 1, status: 'absent' });

    const lease = await hostA.acquire(root, CONFIG, { boundEndpoint: BOUND });
    const acquired = await watch.until((snapshot) => snapshot.phase === 'idle');
    expect(acquired.at(-1)).toMatchObject({
      status: 'unavailable',
      reason: 'served on host host-a',
      epoch: lease.owner.epoch,
      owner: { host: 'host-a', phase: 'idle', process: 'ambiguous' },
    });
    await lease.phase('stopping');
    const stopping = await watch.until((snapshot) => snapshot.status === 'stopping');
    expect(stopping.at(-1)).toMatchObject({ owner: { host: 'host-a', phase: 'stopping', process: 'ambiguous' } });
    await lease.release();
    await watch.until((snapshot) => snapshot.status === 'absent');

    const seen = watch.seen;
    expect(seen.filter((snapshot) => snapshot.resync === true)).toEqual([]);
    expect(seen.map(shapeOf)).toEqual(['absent', 'unavailable idle', 'stopping stopping', 'absent']);
    expect(seen.map((snapshot) => snapshot.seq)).toEqual([1, 2, 3, 4]);
    await watch.stop();
  });

  it('sees an owner killed with SIGKILL quarantined once its lease ends, then its recovery free it, from its own host and from another', async () => {
    const cluster = await startEtcd({ members: 1 });
    const place = placeOn(cluster);
    const root = makeWorkspace(place, 'killed');
    const [hostA, hostB] = await Promise.all([hostOf(place, 'host-a'), hostOf(place, 'host-b')]);
    const { child, epoch } = await spawnOwner(place, 'host-a', root);
    const [fromA, fromB] = [watching(hostA, root), watching(hostB, root)];
    await fromB.until((snapshot) => snapshot.phase === 'idle');
    await killAndReap(child);

    // etcd deletes the owner key when the lease ends: an event of the watched keys, no gap.
    const seenByB = await fromB.until((snapshot) => snapshot.status === 'quarantined');
    expect(seenByB.at(-1)).toMatchObject({
      epoch,
      phase: 'quarantined',
      owner: { host: 'host-a', pid: child.pid, process: 'ambiguous' },
    });
    expect(seenByB.filter((snapshot) => snapshot.resync === true)).toEqual([]);
    // Its own host can tell its process is gone (a verdict no notification announces, so no gap either).
    const seenByA = await fromA.until((snapshot) => snapshot.status === 'quarantined');
    expect(seenByA.at(-1)).toMatchObject({ epoch, owner: { host: 'host-a', pid: child.pid, process: 'absent' } });
    expect(seenByA.filter((snapshot) => snapshot.resync === true)).toEqual([]);

    // Recovered from its host with the digest its review showed: free after `quarantined`, stopped where its
    // files stay, absent on the other host. The etcd fence goes last (an event of the watched keys): on host B
    // one change; on host A, anything seen between its files' recovery and the fence's is still quarantined.
    const { digest } = await hostA.view(root);
    expect(await hostA.recover(root, { expectedDigest: digest, assertAuthority: () => {} })).toMatchObject({
      recovered: true,
    });
    expect((await fromB.until((snapshot) => snapshot.status !== 'quarantined')).map(shapeOf)).toEqual(['absent']);
    const freedForA = await fromA.until((snapshot) => snapshot.status !== 'quarantined');
    expect(freedForA.at(-1)).toMatchObject({ status: 'stopped', epoch, phase: 'stopped' });
    expect(freedForA.filter((snapshot) => snapshot.resync === true)).toEqual([]);
    for (const watch of [fromA, fromB])
      expect(watch.seen.map((snapshot) => snapshot.seq)).toEqual(watch.seen.map((_, index) => index + 1));
    await Promise.all([fromA.stop(), fromB.stop()]);
  });

  it('delivers an outage of its etcd member once, and the state after it, changed and compacted meanwhile, as a resync', async () => {
    const cluster = await startEtcd({ members: 3 });
    const place = placeOn(cluster);
    const root = makeWorkspace(place, 'compacted');
    const down = await followerOf(cluster);
    const [member, others] = [cluster.endpoints[down]!, cluster.endpoints.filter((_, index) => index !== down)];
    const on = (endpoints: readonly string[]): Place => ({
      ...place,
      backend: { kind: 'etcd', endpoints: [...endpoints], prefix: place.prefix },
    });
    // Host B talks to one follower alone: while it is down, its watch streams are gone and it reads nothing.
    // Host A talks to the others, whose leader stays: its requests never wait on the member that is down or an election.
    const [hostA, hostB] = await Promise.all([hostOf(on(others), 'host-a'), hostOf(on([member]), 'host-b')]);
    const watch = watching(hostB, root);
    expect(await watch.until(() => true)).toEqual([{ seq: 1, status: 'absent' }]);

    await cluster.kill(down);
    // Its streams ended with the member, and nothing can be read: the watch says so.
    const [unavailable] = await watch.until((snapshot) => snapshot.status === 'unavailable');
    expect(unavailable).toMatchObject({ reason: expect.stringMatching(/^etcd: /) });
    // Changes it cannot see, then their history compacted away: no watch can resume from before them.
    const lease = await hostA.acquire(root, CONFIG, { boundEndpoint: BOUND });
    await lease.phase('stopping');
    await etcdctl(cluster, ['compaction', await revisionOf(cluster, place)]);
    // The outage is one change, delivered once: not again at each attempt to watch anew while the member is down.
    const outage = watch.seen.slice(watch.seen.indexOf(unavailable!));
    expect(outage.map((snapshot) => snapshot.status)).toEqual(outage.map(() => 'unavailable'));
    expect(new Set(outage.map((snapshot) => snapshot.seq)).size).toBe(outage.length);
    await cluster.restart(down);

    const after = await watch.until((snapshot) => snapshot.status === 'stopping');
    expect(after.at(-1)).toMatchObject({
      resync: true,
      epoch: lease.owner.epoch,
      owner: { host: 'host-a', phase: 'stopping' },
    });
    // And follows on from there (whether its release is announced, or read by the poll before the streams are back, is a race).
    await lease.release();
    await watch.until((snapshot) => snapshot.status === 'absent');
    await watch.stop();
  });

  it('ends the iteration on abort and leaves no etcd watch stream or timer behind', async () => {
    const cluster = await startEtcd({ members: 1 });
    const place = placeOn(cluster);
    const root = makeWorkspace(place, 'aborted');
    const hostB = await hostOf(place, 'host-b');
    const [endpoint] = cluster.endpoints;
    await hostB.inspect(root);
    const before = await watchesOn(endpoint!);
    const timers = process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;

    const watch = watching(hostB, root);
    await watch.until(() => true);
    // Two watch streams per watched root: the fence key's and the owner key's.
    await untilWatches(endpoint!, { streams: before.streams + 2, watchers: before.watchers + 2 });
    await watch.stop();
    await untilWatches(endpoint!, before);
    expect(process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length).toBeLessThanOrEqual(timers);
  });
});
