import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { performance } from 'node:perf_hooks';
import {
  cleanUp,
  codeOfAsync,
  etcdAvailable,
  isMessage,
  loopbackEndpoint,
  startEtcd,
  type EtcdCluster,
  type SpawnedChild,
} from '@leasehold/test-utils';
import type { EtcdClient } from './etcd-client.js';
import {
  acquiredOwner,
  answered,
  closeAll,
  freshPrefix,
  keepClaiming,
  leaderIndex,
  outcomeOf,
  ownershipOf,
  rawClient,
  tally,
  until,
} from '../test/helpers.js';

/** One restart under a live owner: the member the owner talks to (its only endpoint), and the member restarted. */
interface RestartCase {
  readonly ownerMember: number;
  readonly restarted: number;
  readonly port: number;
  /** The owner's lease TTL: 2 s, so that a lost lease ends soon; longer where the test asserts the owner keeps it. */
  readonly ttlSeconds?: number;
}

/** Whether the owner's first fenced write after the restart committed, and how its ownership ended. */
interface RestartOutcome {
  readonly afterRestart: 'kept' | 'lost';
  readonly end: 'released' | 'lost';
}

/**
 * Restarts member `restarted` (killed, started again on its data) under an owner that talks only to
 * `ownerMember`, while a claimant on another host claims the root throughout. Asserts what holds
 * either way: the fence survives; the owner keeps its lease (a fenced write commits after the
 * restart, with no loss reported before it) or reports the loss before any fenced write commits;
 * the claimant is refused throughout, never granted while the owner believes it owns.
 */
async function restartUnderOwner(
  cluster: EtcdCluster,
  { ownerMember, restarted, port, ttlSeconds = 2 }: RestartCase,
): Promise<RestartOutcome> {
  const prefix = freshPrefix();
  const root = '/srv/restarted';
  const written = `/app/restarted-${port}`;
  const raw = rawClient(cluster.endpoints);
  const claimant = ownershipOf(cluster.endpoints, prefix, 'host-b');
  const claim = (): Promise<string> =>
    codeOfAsync(() => claimant.acquire(root, { endpoint: loopbackEndpoint(port + 1) }));
  const { child: owner } = await acquiredOwner({
    endpoints: [cluster.endpoints[ownerMember] ?? ''],
    prefix,
    host: 'host-a',
    root,
    endpoint: loopbackEndpoint(port),
    ttlSeconds,
  });
  const fenceKey = `${prefix}/fence${root}/`;
  const fence = (await raw.range(fenceKey)).kvs[0];
  expect(fence).toBeDefined();
  expect(await claim()).toBe('conflict');
  const claims = keepClaiming(claimant, root, loopbackEndpoint(port + 1));

  const restartedAt = performance.now();
  await cluster.restart(restarted);
  const restartMs = performance.now() - restartedAt;
  // The fence is durable: the same key, value and revisions as before the restart.
  expect((await answered(() => raw.range(fenceKey))).kvs[0]).toEqual(fence);

  const afterRestart = await writeAfterRestart(owner, raw, written);
  // A lost owner's lease ends too (revoked, or at its TTL): claims go on until the root reads quarantined, not free.
  if (afterRestart === 'lost') await until(async () => (await claimant.inspect(root)).status === 'quarantined');
  // Stopped before any release: a claim after it could rightly win.
  const codes = await claims.stop();
  expect(codes.filter((code) => !['conflict', 'quarantine', 'unavailable'].includes(code))).toEqual([]);
  const end = afterRestart === 'lost' ? 'lost' : await releaseOrLoss(owner);
  console.log(
    `etcd member ${restarted} restarted (${Math.round(restartMs)} ms, owner on member ${ownerMember}, TTL ${ttlSeconds} s): ` +
      `${afterRestart === 'kept' ? 'the owner kept its lease (a fenced write committed after the restart), then ' : 'before its first write after the restart, the owner '}` +
      `${end === 'released' ? 'released the root' : `reported the loss (${JSON.stringify(lossOf(owner))})`}; claims meanwhile: ${JSON.stringify(tally(codes))}`,
  );
  if (end === 'released') {
    expect(await claimant.inspect(root)).toEqual({ status: 'absent' });
  } else {
    await until(async () => (await claimant.inspect(root)).status === 'quarantined');
    expect(await claim()).toBe('quarantine');
    await claimant.recover(root, (await claimant.recoveryView(root)).digest);
    await (await claimant.acquire(root, { endpoint: loopbackEndpoint(port + 1) })).release();
  }
  return { afterRestart, end };
}

/** The owner's `lost` message, or undefined if it reported none. */
function lossOf(owner: SpawnedChild): unknown {
  const line = owner.lines.find(isMessage('lost'));
  return line === undefined ? undefined : (JSON.parse(line) as { lost: unknown }).lost;
}

/** The owner's first fenced write after the restart: it commits with no loss reported before it, or is refused after the loss and never reaches etcd. */
async function writeAfterRestart(owner: SpawnedChild, raw: EtcdClient, key: string): Promise<'kept' | 'lost'> {
  owner.send(`put ${key} after`);
  const answer = await owner.line((line) => isMessage('put')(line) || isMessage('putRefused')(line));
  const lostAt = owner.lines.findIndex(isMessage('lost'));
  if (isMessage('put')(answer)) {
    expect(lostAt === -1 || lostAt > owner.lines.indexOf(answer)).toBe(true);
    expect(Buffer.from((await raw.range(key)).kvs[0]?.value ?? []).toString()).toBe('after');
    return 'kept';
  }
  expect(lostAt).toBeGreaterThanOrEqual(0);
  expect(lostAt).toBeLessThan(owner.lines.indexOf(answer));
  expect((JSON.parse(answer) as { putRefused: unknown }).putRefused).toEqual(lossOf(owner));
  expect((await raw.range(key)).kvs).toEqual([]);
  return 'lost';
}

/** Asks the owner to release: it does, or it refuses after reporting a loss that came after its write (its lease then ends). */
async function releaseOrLoss(owner: SpawnedChild): Promise<'released' | 'lost'> {
  owner.send('release');
  const [outcome, detail] = await outcomeOf(owner, ['released', 'releaseRefused']);
  if (outcome === 'released') return 'released';
  expect(detail).toEqual(lossOf(owner));
  return 'lost';
}

describe.skipIf(!etcdAvailable())('etcd restarted under a live owner, on one real etcd member', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 1 });
  });
  afterEach(closeAll);
  afterAll(cleanUp);

  it('the fence survives; the owner, whose watch ended with the member, reports the loss before any fenced write; never two owners', async () => {
    expect(await restartUnderOwner(cluster, { ownerMember: 0, restarted: 0, port: 53000 })).toEqual({
      afterRestart: 'lost',
      end: 'lost',
    });
  });
});

describe.skipIf(!etcdAvailable())('etcd members restarted under a live owner, on a real 3-member cluster', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 3 });
  });
  afterEach(closeAll);
  afterAll(cleanUp);

  it("the owner's own member restarted: the fence survives, the owner cleanly loses its lease, never two owners", async () => {
    const leader = await leaderIndex(cluster);
    const follower = (leader + 1) % 3;
    expect(await restartUnderOwner(cluster, { ownerMember: follower, restarted: follower, port: 54000 })).toEqual({
      afterRestart: 'lost',
      end: 'lost',
    });
  });

  it('another member restarted: the fence survives and the owner keeps its lease, never two owners', async () => {
    const leader = await leaderIndex(cluster);
    // That the owner keeps its lease is a claim about liveness: its TTL leaves room for the stalls of a busy
    // 2-core machine (the member's restart and a new leader's first heartbeats), so the claim is about etcd, not the
    // machine's mood. Safety is asserted either way.
    expect(
      await restartUnderOwner(cluster, {
        ownerMember: leader,
        restarted: (leader + 1) % 3,
        port: 55000,
        ttlSeconds: 6,
      }),
    ).toEqual({ afterRestart: 'kept', end: 'released' });
  });

  it('the leader restarted under an owner on a follower: the fence survives, the owner keeps or cleanly loses its lease, never two owners', async () => {
    const leader = await leaderIndex(cluster);
    // An election under way can outlast the owner's deadline (TTL 2 s): either ending is sound, and restartUnderOwner checks each.
    const outcome = await restartUnderOwner(cluster, { ownerMember: (leader + 1) % 3, restarted: leader, port: 56000 });
    expect(['kept', 'lost']).toContain(outcome.afterRestart);
  });
});
