import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { OwnerConfig } from '@leasehold/contracts';
import { fileOwnership } from '@leasehold/coordination';
import { etcdBackend, type EtcdBackend } from '@leasehold/etcd';
import { fileRecovery } from '@leasehold/recovery';
import {
  cleanUp,
  codeOfAsync,
  etcdAvailable,
  etcdctl,
  killAndReap,
  makeWorkspace,
  startEtcd,
} from '@leasehold/test-utils';
import {
  BOUND,
  CONFIG,
  closeHosts,
  hostOf,
  openElsewhere,
  placeOn,
  spawnOwner,
  stateHomeOf,
} from '../test/etcd-hosts.js';

// The etcd backend composed with each host's real file backend, as `openStateHome` composes it for
// a state home that records etcd (two hosts on one machine: ../test/etcd-hosts.ts).

afterEach(async () => {
  await closeHosts();
  await cleanUp();
});

/** The `code` of a ContractError (any other value has none). */
function codeOfError(error: unknown): unknown {
  return typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
}

/** Polls `inspect` from `backend` until it answers `status` (the test's timeout bounds it). */
async function untilStatus(backend: EtcdBackend, root: string, status: string): Promise<void> {
  while ((await backend.inspect(root)).status !== status) await new Promise((resolve) => setTimeout(resolve, 50));
}

describe.skipIf(!etcdAvailable())(
  'the etcd backend over each host’s file backend, as a state home that records etcd opens it, on a real etcd',
  () => {
    it('refuses a local backend opened with another backend', async () => {
      const cluster = await startEtcd({ members: 1 });
      const place = placeOn(cluster);
      const stateHome = stateHomeOf(place, 'host-a');
      const refusal = await codeOfAsync(async () =>
        etcdBackend({
          endpoints: cluster.endpoints,
          prefix: place.prefix,
          host: 'host-a',
          local: fileOwnership({ stateHome }),
          localRecovery: fileRecovery({ stateHome }),
        }),
      );
      expect(refusal).toBe('refused');
      const backend = await hostOf(place, 'host-a');
      expect(backend.backend).toEqual(place.backend);
      expect(backend.stateHome).toBe(stateHome);
    });

    it('keeps one owner per root across two hosts: refused on the other host and on the same one, the same port allowed, free after release', async () => {
      const cluster = await startEtcd({ members: 1 });
      const place = placeOn(cluster);
      const [root, other] = [makeWorkspace(place, 'shared'), makeWorkspace(place, 'other')];
      const [hostA, hostB] = await Promise.all([hostOf(place, 'host-a'), hostOf(place, 'host-b')]);

      const lease = await hostA.acquire(root, CONFIG, { boundEndpoint: BOUND });
      expect(lease.root).toBe(root);
      // The folder's own mark names the etcd ownership, by its prefix, whichever host's state home made it.
      expect(JSON.parse(readFileSync(join(root, '.leasehold', 'owner.json'), 'utf8'))).toMatchObject({
        backend: 'etcd',
        prefix: place.prefix,
        epoch: lease.owner.epoch,
      });
      expect(lease.owner).toMatchObject({ endpoint: BOUND, pid: process.pid, phase: 'idle' });
      expect(lease.sequencer).toMatchObject({ root });
      await lease.assert();
      expect(await codeOfAsync(() => hostB.acquire(root, CONFIG, { boundEndpoint: 'http://127.0.0.1:40002' }))).toBe(
        'conflict',
      );
      expect(await codeOfAsync(() => hostA.acquire(root, CONFIG, { boundEndpoint: 'http://127.0.0.1:40002' }))).toBe(
        'conflict',
      );
      // The same port on the other host is another endpoint.
      const elsewhere = await hostB.acquire(other, CONFIG, { boundEndpoint: BOUND });

      // Host A's files tell its own owner (files never prove an idle owner live: the transport does); host B sees host A's
      // etcd fence, with the same epoch: one ownership has one epoch, in etcd and in the files.
      const epoch = lease.owner.epoch;
      const listed = await hostB.list();
      expect(listed.find((row) => row.root === root)?.epoch).toBe(epoch);
      expect(
        listed
          .map(({ root: at, host, endpoint, pid, verdict }) => ({ at, host, endpoint, pid, verdict }))
          .sort((a, b) => a.at.localeCompare(b.at)),
      ).toEqual(
        [
          { at: root, host: 'host-a', endpoint: BOUND, pid: process.pid, verdict: 'leased' },
          { at: other, host: 'host-b', endpoint: BOUND, pid: process.pid, verdict: 'leased' },
        ].sort((a, b) => a.at.localeCompare(b.at)),
      );
      expect(await hostA.list()).toEqual(listed);
      expect(await hostA.inspect(root)).toMatchObject({
        status: 'unavailable',
        owner: { epoch, endpoint: BOUND, phase: 'idle' },
      });
      expect(await hostA.inspect(root)).not.toHaveProperty('inProgress');
      // Host A's process is this one, but host B cannot tell another host's process: `ambiguous`.
      const seenFromB = { endpoint: BOUND, epoch, pid: process.pid, host: 'host-a', process: 'ambiguous' };
      expect(await hostB.inspect(root)).toEqual({
        status: 'unavailable',
        reason: 'served on host host-a',
        // The etcd owner key's version: how many times the owner's record was written.
        owner: { ...seenFromB, phase: 'idle', version: 1 },
      });
      await lease.phase('stopping');
      expect(await hostA.inspect(root)).toMatchObject({ status: 'stopping', owner: { epoch, phase: 'stopping' } });
      expect(await hostB.inspect(root)).toEqual({
        status: 'stopping',
        owner: { ...seenFromB, phase: 'stopping', version: 2 },
      });

      await lease.release();
      expect(await hostA.inspect(root)).toMatchObject({ status: 'stopped', epoch });
      expect(await hostB.inspect(root)).toEqual({ status: 'absent' });
      expect(await codeOfAsync(() => lease.assert())).toBe('unavailable');

      const next = await hostB.acquire(root, CONFIG, { boundEndpoint: 'http://127.0.0.1:40002' });
      expect(await hostA.inspect(root)).toMatchObject({ status: 'unavailable', reason: 'served on host host-b' });
      await next.release();
      await elsewhere.release();
      expect(await hostA.list()).toEqual([]);
    });

    it('gives the etcd fence back when the local acquire fails', async () => {
      const cluster = await startEtcd({ members: 1 });
      const place = placeOn(cluster);
      const root = makeWorkspace(place, 'rolled-back');
      const [hostA, hostB] = await Promise.all([hostOf(place, 'host-a'), hostOf(place, 'host-b')]);
      // The files refuse an endpoint the config does not admit; etcd had already fenced the root.
      const fixedPort: OwnerConfig = { ...CONFIG, endpoint: 'http://127.0.0.1:5000' };
      expect(await codeOfAsync(() => hostA.acquire(root, fixedPort, { boundEndpoint: BOUND }))).toBe('conflict');
      expect(await hostB.inspect(root)).toEqual({ status: 'absent' });
      expect(await hostA.list()).toEqual([]);
      const lease = await hostB.acquire(root, CONFIG, { boundEndpoint: BOUND });
      await lease.release();
    });

    it("commits the owner's writes kept in etcd through its lease only while it holds the root, and never under the prefix", async () => {
      const cluster = await startEtcd({ members: 1 });
      const place = placeOn(cluster);
      const root = makeWorkspace(place, 'writes');
      const hostA = await hostOf(place, 'host-a');
      const lease = await hostA.acquire(root, CONFIG, { boundEndpoint: BOUND });
      const key = `/app${place.prefix}/last-writer`;
      const { revision } = await lease.fencedPut(key, 'owner');
      expect(BigInt(revision) > BigInt(lease.sequencer.revision)).toBe(true);
      expect(await codeOfAsync(() => lease.fencedTxn([{ put: `${place.prefix}/fence/elsewhere`, value: 'x' }]))).toBe(
        'refused',
      );
      await lease.release();
      expect(await codeOfAsync(() => lease.fencedPut(key, 'late'))).toBe('unavailable');
      expect(await etcdctl(cluster, ['get', '--print-value-only', key])).toBe('owner\n');
    });

    it('reads an etcd fence of this host without its files as an acquire or release in progress', async () => {
      const cluster = await startEtcd({ members: 1 });
      const place = placeOn(cluster);
      const root = makeWorkspace(place, 'between');
      const hostA = await hostOf(place, 'host-a');
      // The state between the composite's two steps, as host A's state home sees it: an etcd fence of
      // this host (taken through this host's name over other files), none of its own files written.
      const elsewhere = await openElsewhere(place, 'host-a', 'state-host-a-elsewhere');
      const fence = await (elsewhere.ownership as EtcdBackend).acquire(root, CONFIG, { boundEndpoint: BOUND });
      expect(await hostA.inspect(root)).toEqual({
        status: 'unavailable',
        reason: expect.stringContaining('in progress'),
        owner: {
          epoch: fence.owner.epoch,
          endpoint: BOUND,
          pid: process.pid,
          host: 'host-a',
          phase: 'idle',
          process: 'live',
        },
        inProgress: true,
      });
      await fence.release();
      expect(await hostA.inspect(root)).toEqual({ status: 'absent' });
    });

    it.skipIf(!etcdAvailable('etcdctl'))(
      'reports the loss of the etcd lease once through watch; its release frees the files and leaves the etcd fence, recovered from any host',
      async () => {
        const cluster = await startEtcd({ members: 1 });
        const place = placeOn(cluster);
        const root = makeWorkspace(place, 'lost');
        const [hostA, hostB] = await Promise.all([hostOf(place, 'host-a'), hostOf(place, 'host-b')]);
        const lease = await hostA.acquire(root, CONFIG, { boundEndpoint: BOUND });
        const losses: unknown[] = [];
        const lost = new Promise<void>((resolve) => {
          lease.watch(50, (error) => {
            losses.push(error);
            resolve();
          });
        });
        // Someone deletes the owner key behind its back: the etcd lease counts itself lost.
        await etcdctl(cluster, ['del', `${place.prefix}/owner${root}/`]);
        await lost;
        expect(await codeOfAsync(() => lease.assert())).toBe('conflict');

        // The files go first and do; the etcd fence goes last and cannot: the root stays fenced across hosts.
        expect(await codeOfAsync(() => lease.release())).toBe('conflict');
        expect(await hostA.inspect(root)).toMatchObject({
          status: 'quarantined',
          owner: { host: 'host-a', phase: 'quarantined' },
        });
        expect(await codeOfAsync(() => hostB.acquire(root, CONFIG, { boundEndpoint: BOUND }))).toBe('quarantine');
        expect(losses).toHaveLength(1);
        expect(codeOfError(losses[0])).toBe('conflict');

        // Nothing of host A's files is left to recover: host B recovers the etcd fence alone.
        const snapshot = await hostB.view(root);
        expect(snapshot.fences.map((fence) => fence.kind)).toEqual(['etcd-fence']);
        expect(await hostA.view(root)).toMatchObject({ clear: false, holders: [{ verdict: 'lease-ended' }] });
        const result = await hostB.recover(root, { expectedDigest: snapshot.digest, assertAuthority: () => {} });
        expect(result).toMatchObject({ recovered: true });
        const next = await hostA.acquire(root, CONFIG, { boundEndpoint: BOUND });
        await next.release();
      },
    );

    it.skipIf(!etcdAvailable('etcdctl'))(
      'quarantines the root of an owner killed with SIGKILL once its lease ends, and recovers it from its host with the digest',
      async () => {
        const cluster = await startEtcd({ members: 1 });
        const place = placeOn(cluster);
        const root = makeWorkspace(place, 'crashed');
        const [hostA, hostB] = await Promise.all([hostOf(place, 'host-a'), hostOf(place, 'host-b')]);
        const { child, epoch } = await spawnOwner(place, 'host-a', root);
        const killed = child.pid;
        // Refused while the lease holds, and once it ended too: never freed by its end.
        expect(await codeOfAsync(() => hostB.acquire(root, CONFIG, { boundEndpoint: BOUND }))).toMatch(
          /^(conflict|quarantine)$/,
        );
        await killAndReap(child);

        await untilStatus(hostB, root, 'quarantined');
        const [row] = await hostB.list();
        expect(row).toEqual({ root, endpoint: BOUND, epoch, pid: killed, host: 'host-a', verdict: 'lease-ended' });
        // Read from its fence, on either host, with the epoch its files carry too; its process is proved gone on its own host only.
        const owner = { epoch, endpoint: BOUND, pid: killed, host: 'host-a', phase: 'quarantined' };
        expect(await hostB.inspect(root)).toEqual({ status: 'quarantined', owner: { ...owner, process: 'ambiguous' } });
        expect(await hostA.inspect(root)).toEqual({ status: 'quarantined', owner: { ...owner, process: 'absent' } });
        expect(await codeOfAsync(() => hostB.acquire(root, CONFIG, { boundEndpoint: BOUND }))).toBe('quarantine');

        const snapshot = await hostA.view(root);
        const where = `etcd:${place.prefix}/fence${root}/`;
        expect(snapshot.clear).toBe(false);
        expect(snapshot.fences.filter((fence) => fence.kind !== 'etcd-fence').length).toBeGreaterThan(0);
        expect(snapshot.fences.filter((fence) => fence.kind === 'etcd-fence')).toEqual([
          { kind: 'etcd-fence', path: where, holder: expect.objectContaining({ pid: killed, host: 'host-a' }) },
        ]);
        // Host A can tell more of its own fence: the lease ended, and its process is gone (what --recover-dead needs).
        expect(snapshot.holders).toContainEqual({
          holder: expect.objectContaining({ pid: killed, host: 'host-a' }),
          verdict: 'lease-ended',
          process: 'absent',
          fences: [where],
        });
        expect(
          snapshot.holders.filter((holder) => holder.verdict !== 'lease-ended').map((holder) => holder.verdict),
        ).toEqual(['absent']);
        // The same state on the other host shows only the etcd fence: host A's files are out of its reach.
        expect((await hostB.view(root)).fences.map((fence) => fence.kind)).toEqual(['etcd-fence']);

        const denied = new Error('denied');
        expect(
          await codeOfAsync(() => hostA.recover(root, { expectedDigest: '0'.repeat(64), assertAuthority: () => {} })),
        ).toBe('conflict');
        await expect(
          hostA.recover(root, {
            expectedDigest: snapshot.digest,
            assertAuthority: () => {
              throw denied;
            },
          }),
        ).rejects.toBe(denied);
        const result = await hostA.recover(root, { expectedDigest: snapshot.digest, assertAuthority: () => {} });

        // The etcd record as it is stored, read by no Leasehold code: what the seam's journal leaves out (the fence it removed) too.
        const journals = `${place.prefix}/journal/`;
        const [key, value, ...more] = (await etcdctl(cluster, ['get', '--prefix', journals]))
          .split('\n')
          .filter((line) => line !== '');
        expect(more).toEqual([]);
        expect(result).toEqual({ recovered: true, record: key?.slice(journals.length) });
        expect(JSON.parse(value!)).toMatchObject({
          root,
          fence: { epoch: owner.epoch, endpoint: BOUND, pid: killed, host: 'host-a' },
        });
        // What stays is a stopped workspace's service folder, which fences nothing: no etcd fence, no holder.
        const after = await hostA.view(root);
        expect(after).toMatchObject({ holders: [], clear: true });
        expect(after.fences.filter((fence) => fence.kind === 'etcd-fence' || fence.holder !== undefined)).toEqual([]);
        expect(
          await hostA.recover(root, { expectedDigest: (await hostA.view(root)).digest, assertAuthority: () => {} }),
        ).toEqual({ recovered: false, reason: 'clear' });
        expect(await hostB.inspect(root)).toEqual({ status: 'absent' });
        expect(await hostA.inspect(root)).toMatchObject({ status: 'stopped' });

        const lease = await hostB.acquire(root, CONFIG, { boundEndpoint: BOUND });
        expect(BigInt(lease.sequencer.revision)).toBeGreaterThan(0n);
        await lease.release();
      },
    );
  },
);
