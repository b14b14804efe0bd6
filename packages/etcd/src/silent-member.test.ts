import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { performance } from 'node:perf_hooks';
import { cleanUp, codeOfAsync, etcdAvailable, startEtcd, type EtcdCluster } from '@leasehold/test-utils';
import { closeAll, freshPrefix, leaderIndex, ownershipOf } from '../test/helpers.js';
import type { EtcdOwnerLease } from './index.js';

const endpointOf = (port: number): string => `http://127.0.0.1:${port}`;
const TTL_SECONDS = 4;
const OWNERS = 6;

/** What one owner saw while a member was frozen: its loss (if any), and each fenced write's outcome and time. */
interface Seen {
  lost?: { readonly code: string; readonly atMs: number };
  readonly writes: { readonly ok: boolean; readonly ms: number }[];
}

/** Each owner writes fenced puts one after another until `endMs` (on performance.now()), or until its lease is lost. */
async function writeUntil(lease: EtcdOwnerLease, seen: Seen, key: string, endMs: number): Promise<void> {
  for (let index = 0; performance.now() < endMs && seen.lost === undefined; index++) {
    const sentAt = performance.now();
    const ok = await lease.fencedPut(key, String(index)).then(
      () => true,
      () => false,
    );
    seen.writes.push({ ok, ms: performance.now() - sentAt });
  }
}

const percentile = (values: readonly number[], p: number): number => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))] ?? 0;

describe.skipIf(!etcdAvailable())('owners configured with every member, one member silent (SIGSTOP), on a real 3-member cluster', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 3 });
  });
  afterEach(closeAll);
  afterAll(cleanUp);

  /** Six owners on all three members; `frozen` is SIGSTOPped for three TTLs while they renew and write. */
  async function sixOwnersThrough(frozen: number, port: number): Promise<{ seen: Seen[]; frozenMs: number; prefix: string; roots: string[] }> {
    const prefix = freshPrefix();
    const roots = Array.from({ length: OWNERS }, (_, index) => `/srv/silent-${index}`);
    const leases = await Promise.all(roots.map((root, index) => ownershipOf(cluster.endpoints, prefix, `host-${index}`).acquire(root, { endpoint: endpointOf(port + index), ttlSeconds: TTL_SECONDS })));
    const seen: Seen[] = leases.map(() => ({ writes: [] }));
    const frozenAt = performance.now();
    leases.forEach((lease, index) => lease.watch((error) => (seen[index]!.lost = { code: error.code, atMs: performance.now() - frozenAt })));
    cluster.freeze(frozen);
    try {
      await Promise.all(leases.map((lease, index) => writeUntil(lease, seen[index]!, `/app${prefix}/data-${index}`, frozenAt + 3 * TTL_SECONDS * 1000)));
    } finally {
      cluster.thaw(frozen);
    }
    const frozenMs = performance.now() - frozenAt;
    for (const [index, lease] of leases.entries()) if (seen[index]!.lost === undefined) await lease.release();
    return { seen, frozenMs, prefix, roots };
  }

  function report(role: string, { seen, frozenMs }: { seen: Seen[]; frozenMs: number }): void {
    const times = seen.flatMap(({ writes }) => writes.filter(({ ok }) => ok).map(({ ms }) => ms));
    const lost = seen.filter(({ lost }) => lost !== undefined).map(({ lost }) => `${lost!.code} at ${Math.round(lost!.atMs)} ms`);
    console.log(
      `${role} frozen ${Math.round(frozenMs)} ms (TTL ${TTL_SECONDS} s), ${OWNERS} owners on all 3 members: ${times.length} fenced writes committed, ` +
        `${seen.flatMap(({ writes }) => writes).length - times.length} failed; write time median ${Math.round(percentile(times, 0.5))} ms, ` +
        `p99 ${Math.round(percentile(times, 0.99))} ms, max ${Math.round(Math.max(0, ...times))} ms; leases lost: ${lost.length === 0 ? 'none' : lost.join(', ')}`,
    );
  }

  it('a follower frozen for three TTLs: no lease is lost and every fenced write commits', async () => {
    const frozen = ((await leaderIndex(cluster)) + 1) % 3;
    const result = await sixOwnersThrough(frozen, 58000);
    report('a follower', result);
    expect(result.seen.map(({ lost }) => lost)).toEqual(Array.from({ length: OWNERS }, () => undefined));
    for (const { writes } of result.seen) {
      expect(writes.length).toBeGreaterThan(0);
      expect(writes.filter(({ ok }) => !ok)).toEqual([]);
    }
  });

  it('the leader frozen for three TTLs: a lease may be lost by its local deadline, but never two owners of one root', async () => {
    const leader = await leaderIndex(cluster);
    const result = await sixOwnersThrough(leader, 58100);
    report('the leader', result);
    // A lost owner counted itself lost (its local deadline, or etcd's answer) and its fence stays: a claimant
    // is refused its root (quarantine), so no root ever has two owners; the others released theirs.
    const claimant = ownershipOf(cluster.endpoints, result.prefix, 'host-claimant');
    for (const [index, { lost }] of result.seen.entries()) {
      if (lost === undefined) continue;
      expect(['unavailable', 'conflict']).toContain(lost.code);
      expect(await codeOfAsync(() => claimant.acquire(result.roots[index]!, { endpoint: endpointOf(58200 + index) }))).toBe('quarantine');
    }
  });
});
