import { afterEach, describe, expect, it } from 'vitest';
import { ContractError, type WaitState } from '@leasehold/contracts';
import {
  cleanUp,
  etcdAvailable,
  etcdctl,
  killAndReap,
  makeWorkspace,
  messageOf,
  messagesOf,
  serveInTurn,
  startEtcd,
  type EtcdCluster,
  type SpawnedChild,
} from '@leasehold/test-utils';
import {
  BOUND,
  CONFIG,
  closeHosts,
  hostOf,
  placeOn,
  spawnAcquirer,
  spawnOwner,
  type Place,
} from '../test/etcd-hosts.js';

// `acquire({ waitMs })` of the etcd backend on a real etcd: one line per root across hosts, a key
// per waiter on its own lease, first come, first served.

afterEach(async () => {
  await closeHosts();
  await cleanUp();
});

const WAITERS = 8;
/** Each waiter's bound: far above what the test needs, so that only a wrong order or a lost turn fails it. */
const WAIT_MS = 60_000;

/** The waiters' keys of the place's prefix, as etcdctl reads them. */
async function waiterKeys(cluster: EtcdCluster, place: Place): Promise<string[]> {
  const keys = await etcdctl(cluster, ['get', `${place.prefix}/waiter/`, '--prefix', '--keys-only']);
  return keys.split('\n').filter((line) => line !== '');
}

/** What each waiter printed, to say why a wait went wrong. */
function said(children: readonly SpawnedChild[]): string {
  return children.map((child) => child.lines.join(' | ')).join(' || ');
}

describe.skipIf(!etcdAvailable('etcdctl'))('acquire({ waitMs }) of the etcd backend, on a real etcd', () => {
  it(`serves ${WAITERS} waiters of two hosts in the order they came, one at a time; a waiter killed in the middle neither blocks nor reorders the rest`, async () => {
    const cluster = await startEtcd({ members: 1 });
    const place = placeOn(cluster);
    const root = makeWorkspace(place, 'shared');
    const a = await hostOf(place, 'host-a');
    const { child: holder } = await spawnOwner(place, 'host-a', root);
    // Each joins once the one before it waits, alternating hosts: their order of arrival is known.
    const waiters: SpawnedChild[] = [];
    for (let index = 0; index < WAITERS; index += 1) {
      const next = spawnAcquirer(place, index % 2 === 0 ? 'host-a' : 'host-b', root, WAIT_MS);
      const { waiting } = (await messageOf(next, 'waiting')) as { waiting: { ahead: number } };
      expect(waiting.ahead, `waiter ${index}: ${said(waiters)}`).toBe(index);
      waiters.push(next);
    }
    expect(await a.waiters(root)).toBe(WAITERS);
    expect(await waiterKeys(cluster, place)).toHaveLength(WAITERS);
    // The fifth (host-a's) dies in line: its key is removed by a waiter of its host, proved gone.
    const killed = waiters.splice(4, 1)[0]!;
    await killAndReap(killed);

    holder.send('release');
    await messageOf(holder, 'released');
    // One at a time, in the order they came.
    await serveInTurn(waiters);
    expect(messagesOf(killed, 'acquired')).toEqual([]);
    expect(await waiterKeys(cluster, place)).toEqual([]);
    expect(await a.waiters(root)).toBe(0);
    expect(await a.inspect(root)).toMatchObject({ status: 'stopped' });
  });

  it("names the holder, and a cancelled waiter rejects with its signal's reason and leaves no key", async () => {
    const cluster = await startEtcd({ members: 1 });
    const place = placeOn(cluster);
    const root = makeWorkspace(place, 'cancelled');
    const { child: holder } = await spawnOwner(place, 'host-a', root);
    const b = await hostOf(place, 'host-b');
    const cancel = new AbortController();
    const told: WaitState[] = [];
    const waiting = b.acquire(root, CONFIG, {
      boundEndpoint: BOUND,
      waitMs: WAIT_MS,
      signal: cancel.signal,
      onWait: (state) => {
        told.push(state);
        cancel.abort(new Error('the user pressed Ctrl-C'));
      },
    });
    await expect(waiting).rejects.toThrow('the user pressed Ctrl-C');
    // Another host's owner: its pid and host, its command line not readable from here.
    expect(told).toEqual([
      {
        holder: { pid: holder.pid, host: 'host-a', commandLine: null, since: expect.any(String) },
        ahead: 0,
        waitedMs: expect.any(Number),
      },
    ]);
    expect(await waiterKeys(cluster, place)).toEqual([]);
    expect(await b.waiters(root)).toBe(0);
  });

  it('a wait that runs out is conflict naming the owner and the hand-over, and leaves no key', async () => {
    const cluster = await startEtcd({ members: 1 });
    const place = placeOn(cluster);
    const root = makeWorkspace(place, 'timed-out');
    const { child: holder } = await spawnOwner(place, 'host-a', root);
    const a = await hostOf(place, 'host-a');
    const error = await a
      .acquire(root, CONFIG, { boundEndpoint: BOUND, waitMs: 300 })
      .catch((caught: unknown) => caught);
    expect(ContractError.is(error, 'conflict')).toBe(true);
    expect(String(error)).toContain(`still held by pid ${holder.pid} on host `);
    expect((error as { remedy?: string }).remedy).toContain('leasehold stop --ask');
    expect(await waiterKeys(cluster, place)).toEqual([]);
  });

  it('never waits for a quarantine: an owner killed with SIGKILL is answered at once, and no key is left', async () => {
    const cluster = await startEtcd({ members: 1 });
    const place = placeOn(cluster);
    const root = makeWorkspace(place, 'crashed');
    const { child: holder } = await spawnOwner(place, 'host-a', root);
    await killAndReap(holder);
    const a = await hostOf(place, 'host-a');
    const error = await a
      .acquire(root, CONFIG, { boundEndpoint: BOUND, waitMs: WAIT_MS })
      .catch((caught: unknown) => caught);
    expect(ContractError.is(error, 'quarantine'), String(error)).toBe(true);
    expect(await waiterKeys(cluster, place)).toEqual([]);
  });
});
