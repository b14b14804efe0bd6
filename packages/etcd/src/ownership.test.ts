import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  codeOfAsync,
  cleanUp,
  etcdAvailable,
  isMessage,
  killAndReap,
  messagesOf,
  loopbackEndpoint,
  startEtcd,
  stopProcess,
  type EtcdCluster,
} from '@leasehold/test-utils';
import {
  acquiredOwner,
  closeAll,
  freshPrefix,
  outcomeOf,
  ownershipOf,
  pollPause,
  race,
  rawClient,
  releaseOwner,
  until,
} from '../test/helpers.js';
import { MAX_FENCED_OPERATIONS, type FencedOperation } from './etcd-fence.js';
import { MAX_ROOT_DEPTH, TXN_OPS_BOUND } from './keys.js';
import type { EtcdOwnership } from './ownership.js';

const HOSTS = ['host-a', 'host-b'];

describe.skipIf(!etcdAvailable())('etcd ownership on one real etcd member', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 1 });
  });
  afterEach(closeAll);
  afterAll(cleanUp);

  it('lets exactly one of 16 racers across 2 hosts own one root', async () => {
    const prefix = freshPrefix();
    const outcomes = await race(
      Array.from({ length: 16 }, (_, index) => ({
        endpoints: cluster.endpoints,
        prefix,
        host: HOSTS[index % 2] ?? 'host-a',
        root: '/srv/shared',
        endpoint: loopbackEndpoint(41000 + index),
      })),
    );
    const winners = outcomes.filter(({ outcome }) => outcome === 'acquired');
    expect(winners).toHaveLength(1);
    expect(outcomes.filter(({ outcome }) => outcome === 'refused').map(({ detail }) => detail.code)).toEqual(
      Array(15).fill('conflict'),
    );
    await releaseOwner(winners[0]?.child ?? expect.unreachable());
  });

  it('lets 16 racers for 16 disjoint roots all win, with increasing revisions as their sequencers', async () => {
    const prefix = freshPrefix();
    const outcomes = await race(
      Array.from({ length: 16 }, (_, index) => ({
        endpoints: cluster.endpoints,
        prefix,
        host: HOSTS[index % 2] ?? 'host-a',
        root: `/srv/disjoint/w${index}`,
        endpoint: loopbackEndpoint(42000 + index),
      })),
    );
    expect(outcomes.map(({ outcome }) => outcome)).toEqual(Array(16).fill('acquired'));
    const revisions = outcomes.map(({ detail }) => (detail.sequencer as { revision: string }).revision);
    expect(new Set(revisions).size).toBe(16);
    expect((await ownershipOf(cluster.endpoints, prefix, 'host-a').list()).map(({ root }) => root).sort()).toEqual(
      outcomes.map((_, index) => `/srv/disjoint/w${index}`).sort(),
    );
    await Promise.all(outcomes.map(({ child }) => releaseOwner(child)));
  });

  it('refuses a root inside or above an owned root, segment-aware', async () => {
    const prefix = freshPrefix();
    const a = ownershipOf(cluster.endpoints, prefix, 'host-a');
    const b = ownershipOf(cluster.endpoints, prefix, 'host-b');
    const lease = await a.acquire('/srv/nest/a', { endpoint: loopbackEndpoint(43000) });
    expect(await codeOfAsync(() => b.acquire('/srv/nest/a/b', { endpoint: loopbackEndpoint(43001) }))).toBe('conflict');
    expect(await codeOfAsync(() => b.acquire('/srv/nest', { endpoint: loopbackEndpoint(43002) }))).toBe('conflict');
    expect(await codeOfAsync(() => b.acquire('/', { endpoint: loopbackEndpoint(43003) }))).toBe('conflict');
    expect(await codeOfAsync(() => b.acquire('/srv/nest/a', { endpoint: loopbackEndpoint(43004) }))).toBe('conflict');
    const sibling = await b.acquire('/srv/nest/ab', { endpoint: loopbackEndpoint(43005) });
    await sibling.release();
    await lease.release();
    expect(await a.inspect('/srv/nest/a')).toEqual({ status: 'absent' });
  });

  it('scopes endpoints per host: one endpoint twice on one host is refused, the same port on two hosts is not', async () => {
    const prefix = freshPrefix();
    const a = ownershipOf(cluster.endpoints, prefix, 'host-a');
    const b = ownershipOf(cluster.endpoints, prefix, 'host-b');
    const first = await a.acquire('/srv/ports/one', { endpoint: loopbackEndpoint(44000) });
    expect(await codeOfAsync(() => a.acquire('/srv/ports/two', { endpoint: loopbackEndpoint(44000) }))).toBe(
      'conflict',
    );
    const other = await b.acquire('/srv/ports/two', { endpoint: loopbackEndpoint(44000) });
    await other.release();
    await first.release();
  });

  it(`refuses a root deeper than one transaction can check (${MAX_ROOT_DEPTH} levels), naming the bound`, async () => {
    const ownership = ownershipOf(cluster.endpoints, freshPrefix(), 'host-a');
    const rootOf = (depth: number): string => `/${Array.from({ length: depth }, (_, index) => `d${index}`).join('/')}`;
    const refusal = await ownership
      .acquire(rootOf(MAX_ROOT_DEPTH + 1), { endpoint: loopbackEndpoint(45000) })
      .catch((error: unknown) => error);
    expect(refusal).toMatchObject({
      code: 'refused',
      message: expect.stringContaining(`at most ${TXN_OPS_BOUND} operations`),
    });
    const deepest = await ownership.acquire(rootOf(MAX_ROOT_DEPTH), { endpoint: loopbackEndpoint(45000) });
    await deepest.release();
  });

  it('after kill -9 of an owner: refused until its lease expires, then quarantined (never free) until a digest-checked, journalled recovery', async () => {
    const prefix = freshPrefix();
    const root = '/srv/crashed';
    const other = ownershipOf(cluster.endpoints, prefix, 'host-b');
    const raw = rawClient(cluster.endpoints);
    const { child: owner } = await acquiredOwner({
      endpoints: cluster.endpoints,
      prefix,
      host: 'host-a',
      root,
      endpoint: loopbackEndpoint(46000),
      ttlSeconds: 2,
    });
    const whileLive = await other.recoveryView(root);
    expect(await codeOfAsync(() => other.recover(root, whileLive.digest))).toBe('quarantine');

    await killAndReap(owner);
    const killedAt = performance.now();
    const ownerKeyPresent = async (): Promise<boolean> => (await raw.range(`${prefix}/owner${root}/`)).kvs.length > 0;
    let claims = 0;
    for (;;) {
      // The owner key is read before and after each claim: the lease may end between the two reads, and then the
      // claim may have met either state. A key present after the claim was there during it (a lease's keys never
      // come back), so the claim met a live owner; one absent before it met the bare fence.
      const presentBefore = await ownerKeyPresent();
      const code = await codeOfAsync(() => other.acquire(root, { endpoint: loopbackEndpoint(46001) }));
      claims += 1;
      expect(code).not.toBe('no error');
      if (await ownerKeyPresent()) {
        expect(code).toBe('conflict');
        await pollPause();
        continue;
      }
      if (!presentBefore) {
        expect(code).toBe('quarantine');
        break;
      }
    }
    const inspection = await other.inspect(root);
    console.log(
      `kill -9 to quarantined: ${Math.round(performance.now() - killedAt)} ms (TTL 2 s, ${claims} claims refused)`,
    );
    expect(inspection).toMatchObject({ status: 'quarantined', owner: undefined, fence: { root, host: 'host-a' } });
    expect(await other.list()).toMatchObject([{ root, owner: undefined }]);

    expect(await codeOfAsync(() => other.recover(root, whileLive.digest))).toBe('conflict');
    expect(await other.journal()).toEqual([]);
    expect((await other.inspect(root)).status).toBe('quarantined');

    const current = await other.recoveryView(root);
    const record = await other.recover(root, current.digest, { user: 'operator' });
    expect(record).toMatchObject({
      root,
      digest: current.digest,
      fence: { root, host: 'host-a' },
      operator: { host: 'host-b', user: 'operator' },
    });
    expect((await raw.range(`${prefix}/journal/${record.id}`)).kvs).toHaveLength(1);
    expect(await other.journal()).toEqual([record]);
    expect(await codeOfAsync(() => other.recover(root, current.digest))).toBe('conflict');

    const next = await other.acquire(root, { endpoint: loopbackEndpoint(46001) });
    await next.release();
  });

  it("the crashed host's own restart (kill -9, then an acquire from the same host while the lease still lives) answers quarantine, never conflict", async () => {
    const prefix = freshPrefix();
    const root = '/srv/restarted-host';
    const sameHost = ownershipOf(cluster.endpoints, prefix, 'host-a');
    const raw = rawClient(cluster.endpoints);
    // TTL 30 s: the lease outlives the whole test, so the answer cannot come from its end.
    const { child: owner } = await acquiredOwner({
      endpoints: cluster.endpoints,
      prefix,
      host: 'host-a',
      root,
      endpoint: loopbackEndpoint(46500),
      ttlSeconds: 30,
    });
    await killAndReap(owner);

    const refusal = await sameHost
      .acquire(root, { endpoint: loopbackEndpoint(46500) })
      .catch((error: unknown) => error);
    const ownerKv = (await raw.range(`${prefix}/owner${root}/`)).kvs[0];
    // The owner key read after the claim: the lease was live during it, so only this host's proof that the pid is gone can say quarantine.
    expect(ownerKv).toBeDefined();
    expect(refusal).toMatchObject({
      code: 'quarantine',
      message: expect.stringContaining(`pid ${owner.process.pid} on host host-a, absent`),
    });

    // Cleaning up: the lease ended by hand, then the recovery a person would run once it had.
    await raw.revoke(ownerKv?.lease ?? expect.unreachable());
    await sameHost.recover(root, (await sameHost.recoveryView(root)).digest);
  });

  it('an owner stopped (SIGSTOP) past its TTL reports the loss when resumed before any fenced write, and its old revision commits nothing', async () => {
    const prefix = freshPrefix();
    const root = '/srv/paused';
    const other = ownershipOf(cluster.endpoints, prefix, 'host-b');
    const raw = rawClient(cluster.endpoints);
    const { child: owner, sequencer } = await acquiredOwner({
      endpoints: cluster.endpoints,
      prefix,
      host: 'host-a',
      root,
      endpoint: loopbackEndpoint(47000),
      ttlSeconds: 2,
    });
    const oldRevision = sequencer.revision;
    owner.send('put /app/paused/data before');
    await owner.line(isMessage('put'));

    await stopProcess(owner.pid);
    await until(async () => (await other.inspect(root)).status === 'quarantined');
    await other.recover(root, (await other.recoveryView(root)).digest);
    const successor = await other.acquire(root, { endpoint: loopbackEndpoint(47001) });
    expect(BigInt(successor.sequencer.revision)).toBeGreaterThan(BigInt(oldRevision));

    // The write waits in the paused owner's stdin: it is the first thing it can try when resumed.
    owner.send('put /app/paused/data stale');
    owner.process.kill('SIGCONT');
    const resumedAt = performance.now();
    const [, lost] = await outcomeOf(owner, ['lost']);
    console.log(
      `SIGCONT to the loss report: ${Math.round(performance.now() - resumedAt)} ms (${String(lost.code)}: ${String(lost.message)})`,
    );
    const [, refusedPut] = await outcomeOf(owner, ['putRefused']);
    // Its deadline (unavailable) or the owner key's deletion reaching its watch (conflict), whichever it met first.
    expect(['unavailable', 'conflict']).toContain(lost.code);
    expect(refusedPut).toEqual(lost);
    expect(owner.lines.findIndex(isMessage('lost'))).toBeLessThan(owner.lines.findIndex(isMessage('putRefused')));
    expect(messagesOf(owner, 'put')).toHaveLength(1);
    expect(Buffer.from((await raw.range('/app/paused/data')).kvs[0]?.value ?? []).toString()).toBe('before');

    // etcd itself refuses a write fenced by the old revision, while the successor's commits.
    const stale = await raw.txn(
      [{ key: `${prefix}/owner${root}/`, createRevision: oldRevision }],
      [{ put: '/app/paused/data', value: Buffer.from('stale') }],
    );
    expect(stale.succeeded).toBe(false);
    await successor.fencedPut('/app/paused/data', 'successor');
    expect(Buffer.from((await raw.range('/app/paused/data')).kvs[0]?.value ?? []).toString()).toBe('successor');
    await successor.release();
  });

  it('self-fences on a watch event it did not write, and then writes nothing', async () => {
    const prefix = freshPrefix();
    const ownership: EtcdOwnership = ownershipOf(cluster.endpoints, prefix, 'host-a');
    const raw = rawClient(cluster.endpoints);
    const lease = await ownership.acquire('/srv/watched', { endpoint: loopbackEndpoint(48000) });
    await lease.setPhase('stopping');
    await lease.assert();
    const lost = new Promise((resolve) => lease.watch(resolve));
    await raw.txn([], [{ delete: `${prefix}/owner/srv/watched/` }]);
    expect(await lost).toMatchObject({ code: 'conflict', message: expect.stringContaining('deleted') });
    expect(await codeOfAsync(() => lease.fencedPut('/app/watched', 'x'))).toBe('conflict');
    expect(await codeOfAsync(() => lease.release())).toBe('conflict');
    expect((await raw.range('/app/watched')).kvs).toEqual([]);
    expect((await ownership.inspect('/srv/watched')).status).toBe('quarantined');
  });

  it(`commits a fenced write of ${MAX_FENCED_OPERATIONS} operations (with its write-sequence key, etcd's ${TXN_OPS_BOUND} per branch) and refuses one more before sending it`, async () => {
    const prefix = freshPrefix();
    const raw = rawClient(cluster.endpoints);
    const lease = await ownershipOf(cluster.endpoints, prefix, 'host-a').acquire('/srv/widest', {
      endpoint: loopbackEndpoint(49500),
    });
    const puts = (count: number): FencedOperation[] =>
      Array.from({ length: count }, (_, index) => ({ put: `/app/widest/k${index}`, value: 'x' }));
    const { revision } = await lease.fencedTxn(puts(MAX_FENCED_OPERATIONS));
    expect((await raw.range('/app/widest/', true)).kvs.map((kv) => kv.modRevision)).toEqual(
      Array(MAX_FENCED_OPERATIONS).fill(revision),
    );
    expect(await codeOfAsync(() => lease.fencedTxn(puts(MAX_FENCED_OPERATIONS + 1)))).toBe('refused');
    await lease.release();
  });

  it('refuses a fenced write under its own prefix', async () => {
    const prefix = freshPrefix();
    const lease = await ownershipOf(cluster.endpoints, prefix, 'host-a').acquire('/srv/own-keys', {
      endpoint: loopbackEndpoint(49000),
    });
    expect(await codeOfAsync(() => lease.fencedPut(`${prefix}/fence/elsewhere/`, 'x'))).toBe('refused');
    await lease.release();
  });
});
