import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { performance } from 'node:perf_hooks';
import { ContractError } from '@leasehold/contracts';
import {
  cleanUp,
  codeOfAsync,
  etcdAvailable,
  isMessage,
  loopbackEndpoint,
  startEtcd,
  type EtcdCluster,
} from '@leasehold/test-utils';
import type { EtcdClient } from './etcd-client.js';
import {
  acquiredOwner,
  arrivalOf,
  closeAll,
  freshPrefix,
  leaderIndex,
  outcomeOf,
  ownershipOf,
  pollPause,
  rawClient,
} from '../test/helpers.js';

const TTL_SECONDS = 4;

/** What the other side saw while it read the owner key until it was gone, on the test's monotonic clock. */
interface Presence {
  /** The send time of the last read that still found the key: etcd still held the lease at some moment after it. */
  readonly lastPresentSentAt: number;
  /** The answer time of the first read that found the key gone. */
  readonly goneSeenAt: number;
  readonly reads: number;
  readonly unanswered: number;
}

/** Reads `key` (linearizable) until a read finds it gone; a read etcd does not answer (an election under way) is counted and retried. */
async function readUntilGone(raw: EtcdClient, key: string): Promise<Presence> {
  let lastPresentSentAt = Number.NEGATIVE_INFINITY;
  let reads = 0;
  let unanswered = 0;
  for (;;) {
    const sentAt = performance.now();
    const present = await raw.range(key).then(
      ({ kvs }) => kvs.length > 0,
      (error: unknown) => {
        if (!ContractError.is(error, 'unavailable')) throw error;
        return undefined;
      },
    );
    reads += 1;
    if (present === false) return { lastPresentSentAt, goneSeenAt: performance.now(), reads, unanswered };
    if (present === undefined) unanswered += 1;
    else lastPresentSentAt = sentAt;
    await pollPause();
  }
}

const ms = (time: number): string => `${Math.round(time)} ms`;

describe.skipIf(!etcdAvailable())('etcd ownership with its cluster member frozen, on a real 3-member cluster', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 3 });
  });
  afterEach(closeAll);
  afterAll(cleanUp);

  it.each([
    ['a follower', 51000],
    ['the leader', 52000],
  ] as const)(
    "the owner's only member frozen (%s): the owner fences itself by its local deadline while the quorum still holds its lease; then quarantined until recovery",
    async (frozenRole, port) => {
      const prefix = freshPrefix();
      const root = '/srv/frozen';
      const leader = await leaderIndex(cluster);
      const frozen = frozenRole === 'the leader' ? leader : (leader + 1) % cluster.endpoints.length;
      const survivors = cluster.endpoints.filter((_, index) => index !== frozen);
      // The other side talks only to the members that stay up; the owner only to the one that freezes.
      const raw = rawClient(survivors);
      const other = ownershipOf(survivors, prefix, 'host-b');
      // TTL 4 s: its default margin (1 s) is the owner's head start over the lease's end, wide enough that a
      // loaded machine's event-loop stall cannot eat it; the property holds for any margin the owner keeps.
      const { child: owner, sequencer } = await acquiredOwner({
        endpoints: [cluster.endpoints[frozen] ?? ''],
        prefix,
        host: 'host-a',
        root,
        endpoint: loopbackEndpoint(port),
        ttlSeconds: TTL_SECONDS,
      });
      const oldRevision = sequencer.revision;
      const loss = arrivalOf(owner, 'lost');

      await cluster.freeze(frozen);
      const frozenAt = performance.now();
      let thawed = false;
      try {
        const presence = await readUntilGone(raw, `${prefix}/owner${root}/`);
        const lost = await loss;
        console.log(
          `member frozen (${frozenRole}), TTL ${TTL_SECONDS} s: the owner's loss reached the test at ${ms(lost.at - frozenAt)}; ` +
            `the quorum still held its lease at ${ms(presence.lastPresentSentAt - frozenAt)} (last read that found the owner key, sent then); ` +
            `the other side saw the key gone at ${ms(presence.goneSeenAt - frozenAt)} ` +
            `(${presence.reads} reads, ${presence.unanswered} unanswered): the owner was out ${ms(presence.lastPresentSentAt - lost.at)} before the lease could end`,
        );
        // Its local deadline, not anything etcd told it: its only member answers nothing.
        expect(lost.message).toMatchObject({
          code: 'unavailable',
          message: expect.stringContaining('no keep-alive was acknowledged in time'),
        });
        // One clock (the test's): the owner had reported its loss before a read that still found its lease in etcd was sent.
        expect(lost.at).toBeLessThan(presence.lastPresentSentAt);

        // The lease ended: the fence stays, nothing is freed, and only a recovery lets another owner in.
        expect(await other.inspect(root)).toMatchObject({
          status: 'quarantined',
          owner: undefined,
          fence: { root, host: 'host-a' },
        });
        expect(await codeOfAsync(() => other.acquire(root, { endpoint: loopbackEndpoint(port + 1) }))).toBe(
          'quarantine',
        );
        await other.recover(root, (await other.recoveryView(root)).digest);
        const successor = await other.acquire(root, { endpoint: loopbackEndpoint(port + 1) });
        expect(BigInt(successor.sequencer.revision)).toBeGreaterThan(BigInt(oldRevision));

        cluster.thaw(frozen);
        thawed = true;
        // Thawed, the old owner can reach etcd again, and still writes nothing.
        owner.send('put /app/frozen stale');
        const [, refused] = await outcomeOf(owner, ['putRefused', 'put']);
        expect(refused).toEqual(lost.message);
        await successor.fencedPut('/app/frozen', 'successor');
        expect(Buffer.from((await raw.range('/app/frozen')).kvs[0]?.value ?? []).toString()).toBe('successor');
        owner.send('release');
        expect((await outcomeOf(owner, ['releaseRefused', 'released']))[0]).toBe('releaseRefused');
        expect(owner.lines.filter(isMessage('put'))).toEqual([]);
        await successor.release();
      } finally {
        if (!thawed) cluster.thaw(frozen);
      }
    },
  );
});
