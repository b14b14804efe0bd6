import { randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import { performance } from 'node:perf_hooks';
import {
  ContractError,
  decode,
  encode,
  type AutomaticRecovery,
  type WaitTicket,
  type WatchWakeups,
  endpoint as endpointSchema,
  host as hostSchema,
  id,
  sha256,
} from '@leasehold/contracts';
import { currentProcess, ownerStatus, processDetails, type OwnerStatus } from '@leasehold/private-files';
import {
  decodeRecord,
  endpointRecordSchema,
  etcdRecoveryRecordSchema,
  fenceRecordSchema,
  ownerRecordSchema,
  recordBytes,
  type EtcdRecoveryRecord,
  type FenceRecord,
  type OwnerRecord,
} from './documents.js';
import type { EtcdBackendOptions } from './backend-options.js';
import { connect, type EtcdClient, type KeyValue, type Operation, type Watch } from './etcd-client.js';
import { EtcdFence } from './etcd-fence.js';
import { ancestorsOf, keyLayout, type KeyLayout } from './keys.js';
import { EtcdWaiters } from './waiters.js';

export const DEFAULT_TTL_SECONDS = 10;

/** How long a watch of a root's keys waits before it starts again after its streams ended. */
const WATCH_RETRY_MS = 500;

/** How the etcd side of a backend connects: the fields of `EtcdBackendOptions` that are not the host's files or an acquire's. */
export type EtcdOwnershipOptions = Pick<
  EtcdBackendOptions,
  'endpoints' | 'prefix' | 'host' | 'auth' | 'tls' | 'requestTimeoutMs'
>;

export interface AcquireOptions {
  /** The concrete loopback endpoint the owner serves on (`http://127.0.0.1:PORT`), unique per host. */
  readonly endpoint: string;
  /** The lease's time to live (default `DEFAULT_TTL_SECONDS`); etcd may grant a longer one. */
  readonly ttlSeconds?: number;
  /** How long before the lease could expire the owner counts itself lost (default a quarter of the TTL). */
  readonly marginMs?: number;
  /** The epoch its records carry (default a fresh random id): the one the host's files use for the same ownership. */
  readonly epoch?: string;
}

/** A root's fence as read: its record and the revision that last wrote it. */
export interface FenceState {
  readonly record: FenceRecord;
  readonly modRevision: string;
}

/** What `inspect(root)` answers: this root's etcd keys, before `etcdBackend` makes them the seam's `Inspection`. */
export type EtcdInspection =
  | { readonly status: 'absent' }
  | {
      readonly status: 'idle' | 'stopping';
      readonly fence: FenceRecord;
      readonly owner: OwnerRecord;
      /** The owner key's etcd version: 1 when acquired, one more with each phase written. */
      readonly version: number;
    }
  | {
      readonly status: 'quarantined';
      readonly fence: FenceRecord;
      readonly owner: OwnerRecord | undefined;
      readonly reason: string;
    }
  | { readonly status: 'unavailable'; readonly reason: string };

/** One fenced root of `list()`: with its owner while a lease holds it, without once the lease is gone. */
export interface FencedRoot {
  readonly root: string;
  readonly fence: FenceRecord;
  readonly owner: OwnerRecord | undefined;
}

/** Exactly what `recover` acts on, and the digest that names it. */
export interface EtcdRecoveryView {
  readonly root: string;
  readonly fence: FenceState | undefined;
  readonly owner: OwnerRecord | undefined;
  readonly digest: string;
  /** Nothing to recover: no fence. */
  readonly clear: boolean;
}

/** The same ownership of roots as the file backend, kept in etcd so that every host sharing the cluster sees it. */
export class EtcdOwnership {
  readonly prefix: string;
  readonly host: string;
  readonly #keys: KeyLayout;
  readonly #client: EtcdClient;
  readonly #leases = new Set<EtcdFence>();
  readonly #waiters: EtcdWaiters;

  constructor(options: EtcdOwnershipOptions) {
    this.#keys = keyLayout(options.prefix);
    this.prefix = options.prefix;
    this.host = decode(hostSchema, options.host, 'host');
    this.#client = connect(options);
    this.#waiters = new EtcdWaiters(this.#client, this.#keys, this.host, (waiter) => this.processOf(waiter));
  }

  /**
   * Takes a place at the end of `root`'s waiting line, on a lease of its own (`ttlSeconds`, default
   * `DEFAULT_TTL_SECONDS`), woken by each change of the root's keys and of its line.
   * @throws ContractError `refused` (a root that is not absolute and normalised), `unavailable`.
   */
  joinLine(root: string, ttlSeconds = DEFAULT_TTL_SECONDS): Promise<WaitTicket> {
    ancestorsOf(root);
    return this.#waiters.join(root, ttlSeconds, (wakeups) => this.watchKeys(root, wakeups, true));
  }

  /** How many wait in `root`'s line (see `EtcdWaiters.count`). */
  waiters(root: string): Promise<number> {
    ancestorsOf(root);
    return this.#waiters.count(root);
  }

  /**
   * The arguments of `root`'s owner's process, where its owner key names this host and `owner`'s pid
   * (the key's start time proves the command line read is that process's); else null.
   */
  async commandLine(root: string, owner: { readonly pid: number }): Promise<readonly string[] | null> {
    const { owner: record } = await this.#read(root);
    if (record === undefined || record.pid !== owner.pid || record.host !== this.host) return null;
    return processDetails({ ...record, host: currentProcess().host })?.commandLine ?? null;
  }

  /** This root's state from one read of its fence and owner keys; never throws for etcd's sake (`unavailable`). */
  async inspect(root: string): Promise<EtcdInspection> {
    ancestorsOf(root);
    try {
      const { fence, owner, ownerKv } = await this.#read(root);
      if (fence === undefined)
        return owner === undefined
          ? { status: 'absent' }
          : { status: 'unavailable', reason: 'an owner key without a fence' };
      if (owner === undefined)
        return {
          status: 'quarantined',
          fence: fence.record,
          owner,
          reason: "the owner's lease ended without a release: recover it",
        };
      if (owner.phase === 'quarantined')
        return { status: 'quarantined', fence: fence.record, owner, reason: 'its live owner declared it quarantined' };
      return { status: owner.phase, fence: fence.record, owner, version: Number(ownerKv?.version) };
    } catch (error) {
      if (!ContractError.is(error)) throw error;
      return { status: 'unavailable', reason: error.message };
    }
  }

  /** Every fenced root, with its owner or not, from one read. */
  async list(): Promise<FencedRoot[]> {
    const { ranges } = await this.#client.repeatableTxn(
      [],
      [
        { range: this.#keys.fences, prefix: true },
        { range: this.#keys.owners, prefix: true },
      ],
      [],
    );
    const owners = new Map(
      (ranges[1] ?? []).map((kv) => [this.#keys.rootOf(kv.key), decodeRecord(ownerRecordSchema, kv.value, kv.key)]),
    );
    return (ranges[0] ?? []).map((kv) => {
      const root = this.#keys.rootOf(kv.key);
      return { root, fence: decodeRecord(fenceRecordSchema, kv.value, kv.key), owner: owners.get(root) };
    });
  }

  /**
   * Takes `root` in ONE transaction: no fence at any ancestor, none at the root or below, no key
   * for this host's endpoint; then the fence (durable), the owner and endpoint keys (on a new lease).
   */
  async acquire(root: string, options: AcquireOptions): Promise<EtcdFence> {
    const ancestors = ancestorsOf(root);
    const endpoint = decode(endpointSchema, options.endpoint, 'endpoint');
    const ttlSeconds = options.ttlSeconds ?? DEFAULT_TTL_SECONDS;
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1)
      throw new ContractError('refused', 'ttlSeconds: a whole number of seconds, at least 1');
    const identity = currentProcess();
    const holder = {
      root,
      epoch: options.epoch === undefined ? randomUUID() : decode(id, options.epoch, 'epoch'),
      host: this.host,
      pid: identity.pid,
      ...(identity.processStart === undefined ? {} : { processStart: identity.processStart }),
      endpoint,
    };
    const owner: OwnerRecord = { schema: 'leasehold.etcd-owner/1', ...holder, phase: 'idle' };
    const fence: FenceRecord = { schema: 'leasehold.etcd-fence/1', ...holder };
    // etcd grants at least the TTL asked for, so a margin valid for it stays valid.
    if (options.marginMs !== undefined && !(options.marginMs >= 0 && options.marginMs <= (ttlSeconds * 1000) / 2)) {
      throw new ContractError('refused', 'marginMs: from 0 to half the TTL');
    }
    const grantSentAt = performance.now();
    const grant = await this.#client.grant(ttlSeconds);
    const ttlMs = grant.ttlSeconds * 1000;
    const marginMs = options.marginMs ?? ttlMs / 4;
    const endpointKey = this.#keys.endpoint(this.host, endpoint);
    const result = await this.#client
      .txn(
        [
          ...ancestors.map((ancestor) => ({ key: this.#keys.fence(ancestor), version: '0' })),
          { key: this.#keys.fence(root), prefix: true, createRevision: '0' },
          { key: endpointKey, version: '0' },
        ],
        [
          { put: this.#keys.fence(root), value: recordBytes(fence) },
          { put: this.#keys.owner(root), value: recordBytes(owner), lease: grant.id },
          {
            put: endpointKey,
            value: recordBytes({
              schema: 'leasehold.etcd-endpoint/1',
              root,
              epoch: owner.epoch,
              host: this.host,
              endpoint,
            }),
            lease: grant.id,
          },
        ],
        [
          ...ancestors.map((ancestor): Operation => ({ range: this.#keys.fence(ancestor) })),
          { range: this.#keys.fence(root), prefix: true, limit: 1 },
          { range: endpointKey },
        ],
      )
      .catch(async (error: unknown) => {
        await this.#client.revoke(grant.id).catch(() => {});
        throw error;
      });
    if (!result.succeeded) {
      await this.#client.revoke(grant.id).catch(() => {});
      throw await this.#refusal(root, endpoint, result.ranges);
    }
    const lease = new EtcdFence(
      {
        client: this.#client,
        keys: this.#keys,
        owner,
        sequencer: { root, cluster: result.cluster, revision: result.revision },
        leaseId: grant.id,
        ttlMs,
        marginMs,
        grantSentAt,
      },
      (ended) => this.#leases.delete(ended),
    );
    this.#leases.add(lease);
    try {
      await lease.start();
    } catch (error) {
      // Never serve without the watch: give the root back while the lease still proves it ours.
      await lease.release().catch(() => {});
      throw error;
    }
    return lease;
  }

  /** The fence and owner of `root` and the digest `recover` checks: SHA-256 of their canonical encoding. */
  async recoveryView(root: string): Promise<EtcdRecoveryView> {
    ancestorsOf(root);
    const { fence, owner, ownerKv } = await this.#read(root);
    const digest = sha256(
      encode({
        schema: 'leasehold.etcd-recovery-digest/1',
        root,
        fence: fence === undefined ? null : { value: fence.record, modRevision: fence.modRevision },
        owner: ownerKv === undefined ? null : { createRevision: ownerKv.createRevision, lease: ownerKv.lease },
      }),
    );
    return { root, fence, owner, digest, clear: fence === undefined };
  }

  /**
   * Removes a fence whose owner's lease is gone, in ONE transaction that compares the fence's
   * revision and the owner key's absence and writes the journal record. Answers the record.
   */
  async recover(
    root: string,
    expectedDigest: string,
    options: { readonly user?: string; readonly reviewedDigest?: string; readonly automatic?: AutomaticRecovery } = {},
  ): Promise<EtcdRecoveryRecord> {
    const snapshot = await this.recoveryView(root);
    const { fence, owner } = snapshot;
    if (fence === undefined) throw new ContractError('conflict', `${root} has no fence: nothing to recover`);
    if (owner !== undefined) {
      throw new ContractError(
        'quarantine',
        `${root} is held by a live lease (host ${owner.host}, pid ${owner.pid}, epoch ${owner.epoch}): it is never recovered`,
      );
    }
    if (snapshot.digest !== expectedDigest)
      throw new ContractError(
        'conflict',
        `${root} changed since the digest was taken: take a new recovery view and its digest`,
      );
    const identity = currentProcess();
    const record: EtcdRecoveryRecord = {
      schema: 'leasehold.etcd-recovery/1',
      id: randomUUID(),
      root,
      digest: expectedDigest,
      ...(options.reviewedDigest === undefined ? {} : { reviewedDigest: options.reviewedDigest }),
      recordedAt: new Date().toISOString(),
      operator: { pid: identity.pid, host: this.host, user: options.user ?? userInfo().username },
      fence: fence.record,
      fenceRevision: fence.modRevision,
      ...(options.automatic === undefined ? {} : { automatic: options.automatic }),
    };
    const journalKey = this.#keys.journal(record.id);
    const { succeeded } = await this.#client.txn(
      [
        { key: this.#keys.fence(root), modRevision: fence.modRevision },
        { key: this.#keys.owner(root), version: '0' },
        { key: journalKey, version: '0' },
      ],
      [{ delete: this.#keys.fence(root) }, { put: journalKey, value: recordBytes(record) }],
    );
    if (!succeeded)
      throw new ContractError(
        'conflict',
        `${root} changed while it was recovered: nothing was written; take a new recovery view and its digest`,
      );
    return record;
  }

  /**
   * What this host can tell of the process a fence or owner key names: only for one this host wrote (its
   * name is this backend's `host`, which may differ from the OS's), else undefined.
   */
  processOf(fence: Pick<FenceRecord, 'pid' | 'host' | 'processStart'>): OwnerStatus | undefined {
    return fence.host === this.host ? ownerStatus(fence.pid, currentProcess().host, fence.processStart) : undefined;
  }

  /** Every journalled recovery of this prefix. */
  async journal(): Promise<EtcdRecoveryRecord[]> {
    const { kvs } = await this.#client.range(this.#keys.journals, true);
    return kvs.map((kv) => decodeRecord(etcdRecoveryRecordSchema, kv.value, kv.key));
  }

  /**
   * Closes the connection. Leases still held are lost (their fences stay, quarantined): release them first.
   * Their leases are revoked first (best effort, each bounded by the request timeout), so that their owner
   * keys go at once rather than at their TTL; resolves once the connection is closed.
   */
  async close(): Promise<void> {
    await Promise.all([...this.#leases].map((lease) => lease.abandon()));
    this.#client.close();
  }

  /**
   * Wakes a watch of `root` on each change of its fence or owner key, from the revision of one
   * read on, so that no change after that read goes unannounced; the watch is woken once that read
   * answered too, for a change between its own first read and this one. A stream that ends (its
   * revision compacted, cancelled, failed) loses what changed until new streams start from a fresh
   * read: one gap, reported once etcd confirmed them (the read it wakes is the state they continue
   * from), not at each attempt meanwhile. While etcd cannot be read, the watch's poll answers
   * `unavailable`. Answers the function that stops it. With `line`, the keys of its waiters too.
   */
  watchKeys(root: string, { changed, gap }: WatchWakeups, line = false): () => void {
    let streams: Watch[] = [];
    let generation = 0;
    let retry: NodeJS.Timeout | undefined;
    const stop = (): void => {
      generation += 1;
      clearTimeout(retry);
      for (const stream of streams) stream.cancel();
      streams = [];
    };
    const again = (): void => {
      stop();
      const mine = generation;
      retry = setTimeout(() => {
        if (mine === generation) void start(gap);
      }, WATCH_RETRY_MS);
    };
    const start = async (placed: () => void): Promise<void> => {
      const mine = generation;
      try {
        const { header } = await this.#client.range(this.#keys.fence(root));
        if (mine !== generation) return;
        const from = (BigInt(header.revision) + 1n).toString();
        const handlers = {
          onEvents: () => changed(),
          onEnd: () => {
            if (mine === generation) again();
          },
        };
        streams = [this.#keys.fence(root), this.#keys.owner(root)].map((key) =>
          this.#client.watch(key, from, handlers),
        );
        if (line) streams.push(this.#client.watch(this.#keys.waiters(root), from, handlers, true));
        // Reported once etcd confirmed them all: a stream it refuses ends, and is tried again without a gap of its own.
        await Promise.all(streams.map((stream) => stream.created));
        if (mine === generation) placed();
      } catch {
        if (mine === generation) again();
      }
    };
    void start(changed);
    return stop;
  }

  /** The fence and owner keys of `root`, from one read. */
  async #read(
    root: string,
  ): Promise<{ fence: FenceState | undefined; owner: OwnerRecord | undefined; ownerKv: KeyValue | undefined }> {
    const { ranges } = await this.#client.repeatableTxn(
      [],
      [{ range: this.#keys.fence(root) }, { range: this.#keys.owner(root) }],
      [],
    );
    const fenceKv = ranges[0]?.[0];
    const ownerKv = ranges[1]?.[0];
    const fence =
      fenceKv === undefined
        ? undefined
        : { record: decodeRecord(fenceRecordSchema, fenceKv.value, fenceKv.key), modRevision: fenceKv.modRevision };
    const owner = ownerKv === undefined ? undefined : decodeRecord(ownerRecordSchema, ownerKv.value, ownerKv.key);
    if (fence !== undefined && fence.record.root !== root)
      throw new ContractError('refused', `etcd key ${fenceKv?.key}: names another root`);
    return { fence, owner, ownerKv };
  }

  /** Why the acquire transaction failed, from what its failure branch read: a fence that names a live owner, a fence alone, or the endpoint. */
  async #refusal(root: string, endpoint: string, ranges: readonly (readonly KeyValue[])[]): Promise<ContractError> {
    const endpointHeld = ranges.at(-1)?.[0];
    const fenceKv = ranges.slice(0, -1).find((kvs) => kvs.length > 0)?.[0];
    if (fenceKv !== undefined) {
      const held = this.#keys.rootOf(fenceKv.key);
      const fence = decodeRecord(fenceRecordSchema, fenceKv.value, fenceKv.key);
      // The owner key read with the fence again: an owner that released after the failed acquire
      // read its fence is no lease that ended, but a root that changed.
      const { ranges: now } = await this.#client.repeatableTxn(
        [],
        [{ range: fenceKv.key }, { range: this.#keys.owner(held) }],
        [],
      );
      if (now[0]?.[0]?.modRevision !== fenceKv.modRevision) return changedDuringAcquire(root);
      const relation = held === root ? 'is' : `overlaps ${held}, which is`;
      if ((now[1] ?? []).length === 0) {
        return new ContractError(
          'quarantine',
          `${root} ${relation} fenced by an owner whose lease ended (pid ${fence.pid} on host ${fence.host}, lease-ended, epoch ${fence.epoch}): recover it first`,
        );
      }
      // A lease outlives its process by up to its TTL. On the owner's own host the process can be
      // asked: one proved gone (or not provably the same) fences the root as surely as an ended lease,
      // and only a recovery frees it, so say so now rather than `conflict` until the lease ends.
      const status = this.processOf(fence) ?? 'live';
      if (status !== 'live') {
        return new ContractError(
          'quarantine',
          `${root} ${relation} fenced by an owner whose process is gone on this host (pid ${fence.pid} on host ${fence.host}, ${status}, epoch ${fence.epoch}); its lease ends within its TTL: recover it then`,
        );
      }
      return new ContractError(
        'conflict',
        `${root} ${relation} held by a live owner (pid ${fence.pid} on host ${fence.host}, epoch ${fence.epoch})`,
      );
    }
    if (endpointHeld !== undefined) {
      const holder = decodeRecord(endpointRecordSchema, endpointHeld.value, endpointHeld.key);
      return new ContractError(
        'conflict',
        `${endpoint} is already served on host ${this.host}, by the owner of ${holder.root}`,
      );
    }
    return changedDuringAcquire(root);
  }
}

function changedDuringAcquire(root: string): ContractError {
  return new ContractError('conflict', `${root}: its keys changed during the acquire; try again`);
}
