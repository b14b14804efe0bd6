import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { performance } from 'node:perf_hooks';
import {
  cleanUp,
  codeOfAsync,
  etcdAvailable,
  loopbackEndpoint,
  startEtcd,
  type EtcdCluster,
} from '@leasehold/test-utils';
import { EtcdOwnership } from './ownership.js';
import { closeAll, freshPrefix, ownershipOf, rawClient } from '../test/helpers.js';

/** What etcd says is left of lease `id`, in seconds (-1: no such lease, revoked or expired), through its JSON gateway. */
async function remainingTtl(clientUrl: string, id: string): Promise<number> {
  const response = await fetch(`${clientUrl}/v3/lease/timetolive`, {
    method: 'POST',
    body: JSON.stringify({ ID: id }),
  });
  const answer = (await response.json()) as { TTL?: string | number };
  return Number(answer.TTL);
}

describe.skipIf(!etcdAvailable())('liveness, on one real etcd member', () => {
  let cluster: EtcdCluster;
  let clientUrl: string;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 1 });
    clientUrl = cluster.members[0]?.clientUrl ?? '';
  });
  afterEach(closeAll);
  afterAll(cleanUp);

  it('close() revokes the leases it still holds before closing: the owner key goes at once, not at the TTL; the fence stays', async () => {
    const prefix = freshPrefix();
    const root = '/srv/closed';
    const raw = rawClient(cluster.endpoints);
    // A witness lease with the same TTL, granted before the owner's and never kept alive: the owner's lease
    // cannot expire before it does, so the owner's gone while the witness lives means revoked, not expired.
    const witness = await raw.grant(30);
    const ownership = new EtcdOwnership({ endpoints: cluster.endpoints, prefix, host: 'host-a' });
    const lease = await ownership.acquire(root, { endpoint: loopbackEndpoint(57000), ttlSeconds: 30 });
    const lost = new Promise<string>((resolve) => lease.watch((error) => resolve(error.code)));
    const ownerKey = `${prefix}/owner${root}/`;
    const leaseId = (await raw.range(ownerKey)).kvs[0]?.lease ?? '';
    expect(await remainingTtl(clientUrl, leaseId)).toBeGreaterThan(0);

    const closedAt = performance.now();
    await ownership.close();
    const closeMs = performance.now() - closedAt;
    expect((await raw.range(ownerKey)).kvs).toEqual([]);
    expect(await remainingTtl(clientUrl, leaseId)).toBe(-1);
    const witnessTtl = await remainingTtl(clientUrl, witness.id);
    expect(witnessTtl).toBeGreaterThan(0);
    expect(await lost).toBe('unavailable');
    console.log(
      `close() with a lease held (TTL 30 s): resolved in ${Math.round(closeMs)} ms, owner key gone, lease revoked (witness lease still has ${witnessTtl} s)`,
    );

    // The fence stays: the root is quarantined, not free.
    const reader = ownershipOf(cluster.endpoints, prefix, 'host-b');
    expect(await reader.inspect(root)).toMatchObject({ status: 'quarantined', owner: undefined });
    await raw.revoke(witness.id);
  });

  it('a member back after a restart answers the next request: no circuit breaker holds it back after failures', async () => {
    const prefix = freshPrefix();
    const root = '/srv/breaker';
    const claimant = ownershipOf(cluster.endpoints, prefix, 'host-b');
    const claim = (): Promise<string> =>
      codeOfAsync(async () => (await claimant.acquire(root, { endpoint: loopbackEndpoint(57100) })).release());
    expect(await claim()).toBe('no error');

    await cluster.kill(0);
    // Failures in a row, more than the 3 that opened etcd3's default breaker for 5 s.
    const whileDown: string[] = [];
    for (let attempt = 0; attempt < 5; attempt++) whileDown.push(await claim());
    expect(whileDown).toEqual(Array.from({ length: 5 }, () => 'unavailable'));

    const restartedAt = performance.now();
    await cluster.restart(0); // resolves once the member reports itself healthy
    const healthyMs = performance.now() - restartedAt;
    const answeredAt = performance.now();
    const next = await claim();
    console.log(
      `member restarted after 5 failed claims: healthy in ${Math.round(healthyMs)} ms; the next claim answered "${next}" in ${Math.round(performance.now() - answeredAt)} ms`,
    );
    expect(next).toBe('no error');
  });
});
