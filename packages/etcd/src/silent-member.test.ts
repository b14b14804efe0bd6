import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { performance } from 'node:perf_hooks';
import type { ContractError } from '@leasehold/contracts';
import {
  cleanUp,
  etcdAvailable,
  isMessage,
  loopbackEndpoint,
  startEtcd,
  type EtcdCluster,
  type SpawnedChild,
} from '@leasehold/test-utils';
import type { EtcdClient } from './etcd-client.js';
import { HEDGE_MS } from './members.js';
import {
  acquiredOwner,
  closeAll,
  freshPrefix,
  keepClaiming,
  leaderIndex,
  outcomeOf,
  ownershipOf,
  pollPause,
  rawClient,
  tally,
  until,
  type OwnerPlan,
} from '../test/helpers.js';

// TTL 4 s: its default margin (1 s) leaves room for the stalls of a busy 2-core machine running six owner processes
// and three members (the owners start together), so a lost lease says something about etcd, not the machine's mood.
const TTL_SECONDS = 4;
/** Three lease TTLs: long enough that an owner whose keep-alives waited on the silent member would have lost its lease. */
const FROZEN_MS = 3 * TTL_SECONDS * 1000;
const OWNERS = 6;
/**
 * The bound of one fenced write with one member silent: its first copy may go to that member before
 * anything marked it silent, so the hedge bound passes, then one request on an answering member,
 * which a busy 2-core machine (six owners, three etcd members) may stall for up to a second.
 * Before hedging, such a write waited out the 5 s request timeout.
 */
const WRITE_BOUND_MS = HEDGE_MS + 1000;

/** One owner process, configured with every member's client URL, and what it reported. */
interface Owner {
  readonly child: SpawnedChild;
  readonly root: string;
  readonly keys: string;
  readonly revision: string;
}

/** A fenced write the owner answered: committed (`put`) or refused (`putRefused`, its outcome unknown unless the owner had lost). */
interface Answer {
  readonly key: string;
  readonly value: string;
  readonly committed?: { readonly revision: string; readonly ms: number };
  readonly refused?: { readonly code: string };
}

async function startOwners(cluster: EtcdCluster, prefix: string, port: number): Promise<Owner[]> {
  return Promise.all(
    Array.from({ length: OWNERS }, async (_, index) => {
      const root = `/srv/silent/o${index}`;
      // Every member's URL, listed from another member on for each owner: its client prefers the first while it answers,
      // so two owners of six start on whichever member is frozen.
      const endpoints = [...cluster.endpoints.slice(index % 3), ...cluster.endpoints.slice(0, index % 3)];
      const plan: OwnerPlan = {
        endpoints,
        prefix,
        host: 'host-a',
        root,
        endpoint: loopbackEndpoint(port + index),
        ttlSeconds: TTL_SECONDS,
      };
      const { child, sequencer } = await acquiredOwner(plan);
      return { child, root, keys: `/app/silent-${port}/o${index}`, revision: sequencer.revision };
    }),
  );
}

/** The owner's answer to its put of `key`: the `put` line naming it, or the next `putRefused` line. */
async function answerOf(child: SpawnedChild, key: string): Promise<Record<string, Record<string, unknown>>> {
  const refusedBefore = child.lines.filter(isMessage('putRefused')).length;
  let refusals = 0;
  const line = await child.line((candidate) => {
    if (isMessage('putRefused')(candidate)) return ++refusals > refusedBefore;
    return isMessage('put')(candidate) && (JSON.parse(candidate) as { put: { key: string } }).put.key === key;
  });
  return JSON.parse(line) as Record<string, Record<string, unknown>>;
}

/** Fenced writes, each to a key of its own, one after another until `endAt` or the owner reports its loss. */
async function writeUntil(owner: Owner, endAt: number): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let index = 0; performance.now() < endAt && !owner.child.lines.some(isMessage('lost')); index++) {
    const key = `${owner.keys}/w${index}`;
    const value = `v${index}`;
    owner.child.send(`put ${key} ${value}`);
    const answer = await answerOf(owner.child, key);
    const put = answer.put as { revision: string; ms: number } | undefined;
    answers.push(
      put === undefined
        ? { key, value, refused: { code: String(answer.putRefused?.code) } }
        : { key, value, committed: { revision: put.revision, ms: put.ms } },
    );
  }
  return answers;
}

/** Reads back every committed write: its value, committed once (version 1), at the revision the owner was told. */
async function expectCommitted(raw: EtcdClient, answers: readonly Answer[]): Promise<void> {
  for (const { key, value, committed } of answers) {
    if (committed === undefined) continue;
    const kv = (await raw.range(key)).kvs[0];
    expect({
      key,
      value: Buffer.from(kv?.value ?? []).toString(),
      version: kv?.version,
      modRevision: kv?.modRevision,
    }).toEqual({ key, value, version: '1', modRevision: committed.revision });
  }
}

/** The lowest remaining TTL etcd reports for `leases` (its JSON gateway on `clientUrl`) until `stop()`; a read it does not answer is skipped. */
function lowestTtl(clientUrl: string, leases: readonly string[]): { stop(): Promise<number> } {
  let lowest = Number.POSITIVE_INFINITY;
  let stopped = false;
  const reads = (async () => {
    while (!stopped) {
      for (const id of leases) {
        const answer = await fetch(`${clientUrl}/v3/lease/timetolive`, {
          method: 'POST',
          body: JSON.stringify({ ID: id }),
          signal: AbortSignal.timeout(1000),
        })
          .then(async (response) => (await response.json()) as { TTL?: string })
          .catch(() => undefined);
        if (answer?.TTL !== undefined) lowest = Math.min(lowest, Number(answer.TTL));
      }
      await pollPause();
    }
  })();
  return {
    async stop() {
      stopped = true;
      await reads;
      return lowest;
    },
  };
}

/** The lease of each owner's key, read now. */
async function leasesOf(raw: EtcdClient, prefix: string, owners: readonly Owner[]): Promise<string[]> {
  return Promise.all(
    owners.map(async ({ root }) => (await raw.range(`${prefix}/owner${root}/`)).kvs[0]?.lease ?? expect.unreachable()),
  );
}

/** The revision at which `key` was deleted, from a watch replaying its history since `after`. */
function deletionOf(raw: EtcdClient, key: string, after: string): Promise<bigint> {
  return new Promise((resolve, reject) => {
    const watch = raw.watch(key, (BigInt(after) + 1n).toString(), {
      onEvents: (events) => {
        const deleted = events.find((event) => event.type === 'delete');
        if (deleted === undefined) return;
        resolve(BigInt(deleted.kv.modRevision));
        watch.cancel();
      },
      onEnd: (reason) => reject(new Error(reason)),
    });
  });
}

const latencies = (answers: readonly Answer[]): number[] =>
  answers.flatMap(({ committed }) => (committed === undefined ? [] : [committed.ms]));
const ms = (time: number): string => `${Math.round(time)} ms`;

describe.skipIf(!etcdAvailable())(
  'six owners configured with every member, one member silent (SIGSTOP), on a real 3-member cluster',
  () => {
    let cluster: EtcdCluster;
    beforeAll(async () => {
      cluster = await startEtcd({ members: 3 });
    });
    afterEach(closeAll);
    afterAll(cleanUp);

    it(`a follower frozen for three TTLs (${FROZEN_MS} ms): no lease lost, every fenced write committed once, each within ${WRITE_BOUND_MS} ms`, async () => {
      const prefix = freshPrefix();
      const leader = await leaderIndex(cluster);
      const frozen = (leader + 1) % 3;
      const survivor = cluster.members[leader]?.clientUrl ?? '';
      const raw = rawClient([survivor]);
      const owners = await startOwners(cluster, prefix, 58000);
      const lostLines = (): string[] => owners.flatMap(({ child }) => child.lines.filter(isMessage('lost')));
      expect(lostLines()).toEqual([]);
      const ttls = lowestTtl(survivor, await leasesOf(raw, prefix, owners));

      await cluster.freeze(frozen);
      const frozenAt = performance.now();
      let answers: Answer[][];
      try {
        answers = await Promise.all(owners.map((owner) => writeUntil(owner, frozenAt + FROZEN_MS)));
      } finally {
        cluster.thaw(frozen);
      }
      const lowest = await ttls.stop();
      const all = answers.flat();
      const slowest = Math.max(...latencies(all));
      console.log(
        `follower frozen ${ms(performance.now() - frozenAt)} (TTL ${TTL_SECONDS} s): ${all.length} fenced writes by ${OWNERS} owners, slowest ${ms(slowest)} ` +
          `(bound ${WRITE_BOUND_MS} ms: the hedge bound ${HEDGE_MS} ms + one request); lowest remaining TTL etcd reported for any owner's lease: ${lowest} s`,
      );
      expect(lostLines()).toEqual([]);
      expect(all.filter(({ refused }) => refused !== undefined)).toEqual([]);
      expect(all.filter(({ committed }) => (committed?.ms ?? 0) > WRITE_BOUND_MS)).toEqual([]);
      await expectCommitted(raw, all);
      await Promise.all(
        owners.map(async ({ child }) => {
          child.send('release');
          expect((await outcomeOf(child, ['released', 'releaseRefused']))[0]).toBe('released');
        }),
      );
    });

    it(`the leader frozen for three TTLs: an owner may lose its lease by its local deadline, never two owners, and every write that committed did while its owner held`, async () => {
      const prefix = freshPrefix();
      const frozen = await leaderIndex(cluster);
      const survivors = cluster.endpoints.filter((_, index) => index !== frozen);
      const raw = rawClient(survivors);
      const owners = await startOwners(cluster, prefix, 59000);
      // A claimant on another host, configured with every member too, trying to take each root throughout.
      const claimant = ownershipOf(cluster.endpoints, prefix, 'host-b');
      const claims = owners.map(({ root }, index) => keepClaiming(claimant, root, loopbackEndpoint(59100 + index)));

      await cluster.freeze(frozen);
      const frozenAt = performance.now();
      let answers: Answer[][];
      try {
        answers = await Promise.all(owners.map((owner) => writeUntil(owner, frozenAt + FROZEN_MS)));
        // The leader stays frozen for the whole three TTLs, while the claims go on, even once every owner stopped writing.
        await new Promise((resolve) => setTimeout(resolve, frozenAt + FROZEN_MS - performance.now()));
      } finally {
        cluster.thaw(frozen);
      }
      // Stopped before any release: a claim after one could rightly win. No recovery runs, so a claim can never win.
      const codes = (await Promise.all(claims.map((claim) => claim.stop()))).flat();
      expect(codes.filter((code) => !['conflict', 'quarantine', 'unavailable'].includes(code))).toEqual([]);

      const lost: typeof owners = [];
      for (const owner of owners) {
        const held = (await raw.range(`${prefix}/owner${owner.root}/`)).kvs[0]?.createRevision === owner.revision;
        // An owner whose key is gone (its lease ended, or the resumed old leader revoked it) must report the loss,
        // which its watch sees within milliseconds of the deletion: wait for that report rather than race it.
        if (!held) await owner.child.line(isMessage('lost'));
        if (!held || owner.child.lines.some(isMessage('lost'))) lost.push(owner);
      }
      for (const [index, owner] of owners.entries()) {
        const ownAnswers = answers[index] ?? [];
        await expectCommitted(raw, ownAnswers);
        // One that held throughout (its owner key still its own when read): every write it was told committed did so while it held.
        if (!lost.includes(owner)) continue;
        // It lost: every write of its that is in etcd (answered or not) committed before its owner key went.
        const deletedAt = await deletionOf(raw, `${prefix}/owner${owner.root}/`, owner.revision);
        for (const { key } of ownAnswers) {
          const kv = (await raw.range(key)).kvs[0];
          if (kv !== undefined) expect(BigInt(kv.modRevision)).toBeLessThan(deletedAt);
        }
        // It wrote nothing after it reported the loss.
        const lostAt = owner.child.lines.findIndex(isMessage('lost'));
        expect(owner.child.lines.slice(lostAt).filter(isMessage('put'))).toEqual([]);
      }
      const all = answers.flat();
      // Why each lost: its deadline (the election outlasted it), or its owner key deleted once the old leader resumed
      // (etcd 3.4.23's etcd-io/etcd#15247: a leader paused past a TTL revokes that lease when it resumes, kept alive or not).
      const reasons = lost.map(({ child }) =>
        String(
          (JSON.parse(child.lines.find(isMessage('lost')) ?? '{}') as { lost?: { message?: string } }).lost?.message,
        ).replace(/^lost the ownership of \S+: /, ''),
      );
      console.log(
        `leader frozen ${ms(performance.now() - frozenAt)} (TTL ${TTL_SECONDS} s): ${lost.length} of ${OWNERS} owners lost their lease ` +
          `(${JSON.stringify(tally(reasons))}); ` +
          `${all.filter(({ committed }) => committed !== undefined).length} fenced writes committed, slowest ${ms(Math.max(...latencies(all)))}, ` +
          `${all.filter(({ refused }) => refused !== undefined).length} refused; claims meanwhile: ${JSON.stringify(tally(codes))}`,
      );
      await Promise.all(
        owners.map(async (owner) => {
          owner.child.send('release');
          expect((await outcomeOf(owner.child, ['released', 'releaseRefused']))[0]).toBe(
            lost.includes(owner) ? 'releaseRefused' : 'released',
          );
        }),
      );
    });
  },
);

/** What one member says of its raft log (etcd's JSON gateway). */
async function raftOf(clientUrl: string): Promise<{ readonly index: bigint; readonly term: string }> {
  const response = await fetch(`${clientUrl}/v3/maintenance/status`, {
    method: 'POST',
    body: '{}',
    signal: AbortSignal.timeout(1000),
  });
  const status = (await response.json()) as { raftIndex: string; raftTerm: string };
  return { index: BigInt(status.raftIndex), term: status.raftTerm };
}

/**
 * The leader, a follower to freeze, and every member's client URL with that follower first: a client
 * prefers it, and sends it every request, until it is frozen.
 */
async function followerFirst(
  cluster: EtcdCluster,
): Promise<{ readonly leader: number; readonly silent: number; readonly endpoints: string[] }> {
  const leader = await leaderIndex(cluster);
  const silent = (leader + 1) % 3;
  return {
    leader,
    silent,
    endpoints: [silent, leader, (leader + 2) % 3].map((index) => cluster.endpoints[index] ?? ''),
  };
}

describe.skipIf(!etcdAvailable())('a fenced write hedged past a silent member, on a real 3-member cluster', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 3 });
  });
  afterEach(closeAll);
  afterAll(cleanUp);

  it('commits once through another member; its copy on the silent member, applied after it resumes, fails its compare and changes nothing', async () => {
    const prefix = freshPrefix();
    const { leader, silent, endpoints } = await followerFirst(cluster);
    const survivor = cluster.members[leader]?.clientUrl ?? '';
    const raw = rawClient([survivor]);
    const lease = await ownershipOf(endpoints, prefix, 'host-a').acquire('/srv/once', {
      endpoint: loopbackEndpoint(60000),
      ttlSeconds: 10,
    });
    const writesKey = `${prefix}/writes/${lease.epoch}`;
    const read = async (key: string): Promise<{ value: string; version: string; modRevision: string } | undefined> => {
      const kv = (await raw.range(key)).kvs[0];
      return kv === undefined
        ? undefined
        : { value: Buffer.from(kv.value).toString(), version: kv.version, modRevision: kv.modRevision };
    };

    await cluster.freeze(silent);
    let thawed = false;
    try {
      // Sent at once: its first copy goes to the frozen member, which nothing has marked silent yet.
      const sentAt = performance.now();
      const { revision } = await lease.fencedPut('/app/once', 'first');
      const writeMs = performance.now() - sentAt;
      expect(await read('/app/once')).toEqual({ value: 'first', version: '1', modRevision: revision });
      expect((await read(writesKey))?.version).toBe('1');
      const before = await raftOf(survivor);

      cluster.thaw(silent);
      thawed = true;
      // The copy the frozen member held is the only request that can still reach the raft log (keep-alives and
      // reads do not): the log growing in the same term is that copy, decided. It failed its compare.
      await until(async () => (await raftOf(survivor)).index > before.index);
      const after = await raftOf(survivor);
      expect(after.term).toBe(before.term);
      expect(await read('/app/once')).toEqual({ value: 'first', version: '1', modRevision: revision });
      expect((await read(writesKey))?.version).toBe('1');

      const later = await lease.fencedPut('/app/once', 'second');
      expect(await read('/app/once')).toEqual({ value: 'second', version: '2', modRevision: later.revision });
      expect((await read(writesKey))?.version).toBe('2');
      console.log(
        `a fenced write whose first copy went to a frozen follower: committed through another member in ${ms(writeMs)} (hedge bound ${HEDGE_MS} ms); ` +
          `the late copy reached the raft log as entry ${after.index} (committed write at ${before.index}) and changed nothing`,
      );
      await lease.release();
      expect(await read(writesKey)).toBeUndefined();
    } finally {
      if (!thawed) cluster.thaw(silent);
    }
  });

  it("moves the owner's watch off a member that went silent, from the next revision: the owner keeps its lease, and an overwrite of its owner key is still seen while the member is frozen", async () => {
    const prefix = freshPrefix();
    const root = '/srv/watch-moved';
    // The owner's client prefers the follower listed first: its watch is placed there.
    const { leader, silent, endpoints } = await followerFirst(cluster);
    const raw = rawClient([cluster.members[leader]?.clientUrl ?? '']);
    const lease = await ownershipOf(endpoints, prefix, 'host-a').acquire(root, {
      endpoint: loopbackEndpoint(60100),
      ttlSeconds: 10,
    });
    const lost = new Promise<ContractError>((resolve) => lease.watch(resolve));
    const ownerKey = `${prefix}/owner${root}/`;

    await cluster.freeze(silent);
    try {
      // A write whose first copy meets the frozen member: it commits through another, and the member is now silent.
      await lease.fencedPut('/app/watch-moved', 'while frozen');
      await lease.assert();
      // Someone else writes the owner key, keeping its lease: keep-alives still succeed, so only the watch can tell.
      const kv = (await raw.range(ownerKey)).kvs[0] ?? expect.unreachable();
      const overwrittenAt = performance.now();
      await raw.txn([], [{ put: ownerKey, value: new TextEncoder().encode('{"not":"the owner"}'), lease: kv.lease }]);
      const loss = await lost;
      console.log(
        `the watch moved off the frozen member: an overwrite of the owner key reached the owner in ${ms(performance.now() - overwrittenAt)}, the member still frozen`,
      );
      expect(loss).toMatchObject({ code: 'conflict', message: expect.stringContaining('written by someone else') });
    } finally {
      cluster.thaw(silent);
    }
  });
});
