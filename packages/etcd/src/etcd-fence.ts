import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { ContractError } from '@leasehold/contracts';
import { recordBytes, type OwnerPhase, type OwnerRecord } from './documents.js';
import type { Compare, EtcdClient, KeyValue, Operation, WatchEvent } from './etcd-client.js';
import { TXN_OPS_BOUND, type KeyLayout } from './keys.js';

/**
 * The fencing token of one ownership: the revision of the acquire transaction (monotonic across
 * the cluster, as an int64 decimal string: compare with `BigInt`) on the cluster it came from.
 */
export interface Sequencer {
  readonly root: string;
  readonly cluster: string;
  readonly revision: string;
}

/** The most writes one fenced transaction takes: one below etcd's bound, which the write-sequence key's put fills. */
export const MAX_FENCED_OPERATIONS = TXN_OPS_BOUND - 1;

/** One write of a fenced transaction, to a key outside the ownership's prefix. */
export type FencedOperation =
  { readonly put: string; readonly value: string | Uint8Array } | { readonly delete: string };

/** What a lease is built from; `acquire` makes it. */
export interface FenceGrant {
  readonly client: EtcdClient;
  readonly keys: KeyLayout;
  readonly owner: OwnerRecord;
  readonly sequencer: Sequencer;
  readonly leaseId: string;
  readonly ttlMs: number;
  readonly marginMs: number;
  /** The monotonic time (`performance.now()`) the grant was sent: etcd's lease cannot have started before it. */
  readonly grantSentAt: number;
}

/**
 * One ownership of a root, fenced by its etcd lease. It counts itself lost at the FIRST of: its
 * local monotonic deadline (send time of the last acknowledged keep-alive + TTL - margin), a watch
 * event on its owner key that it did not write, a keep-alive answering TTL <= 0, or the watch
 * ending. From then on `assert`, `setPhase`, `fencedTxn` and `release` throw without writing.
 * Made and kept by `EtcdOwnership.acquire` (keep-alives, the local deadline, the watch on its owner
 * key); the etcd half of an `EtcdBackendLease`, whose other half is this host's files.
 */
export class EtcdFence {
  readonly root: string;
  readonly epoch: string;
  readonly endpoint: string;
  readonly sequencer: Sequencer;
  readonly #grant: FenceGrant;
  readonly #listeners = new Set<(error: ContractError) => void>();
  /** The owner values this lease wrote (its phases): a watch event carrying one of them is its own. */
  readonly #written = new Set<string>();
  #phase: OwnerPhase;
  #deadline: number;
  #lost: ContractError | undefined;
  #state: 'live' | 'releasing' | 'released' = 'live';
  #deadlineTimer: NodeJS.Timeout | undefined;
  #keepAliveTimer: NodeJS.Timeout | undefined;
  #cancelWatch: (() => void) | undefined;
  #release: Promise<void> | undefined;
  /** The last fenced write queued: each runs after the one before it settled. */
  #writes: Promise<unknown> = Promise.resolve();
  /** This owner's committed fenced writes as far as it knows: the version its write-sequence key had after the last. */
  #committed = 0;
  /** The best-effort revoke after a loss (settled, never rejected). */
  #revoked: Promise<void> = Promise.resolve();
  readonly #onEnd: (lease: EtcdFence) => void;

  constructor(grant: FenceGrant, onEnd: (lease: EtcdFence) => void) {
    this.#grant = grant;
    this.#onEnd = onEnd;
    this.root = grant.owner.root;
    this.epoch = grant.owner.epoch;
    this.endpoint = grant.owner.endpoint;
    this.sequencer = grant.sequencer;
    this.#phase = grant.owner.phase;
    this.#written.add(Buffer.from(recordBytes(grant.owner)).toString('hex'));
    this.#deadline = grant.grantSentAt + grant.ttlMs - grant.marginMs;
  }

  /** The phase this owner last wrote. */
  get phase(): OwnerPhase {
    return this.#phase;
  }

  /** Starts keep-alives, the deadline and the watch; resolves once etcd confirmed the watch. */
  async start(): Promise<void> {
    this.#armDeadline();
    this.#scheduleKeepAlive();
    const watch = this.#grant.client.watch(
      this.#grant.keys.owner(this.root),
      (BigInt(this.sequencer.revision) + 1n).toString(),
      {
        onEvents: (events) => this.#onWatchEvents(events),
        onEnd: (reason) => this.#lose('unavailable', reason),
      },
    );
    this.#cancelWatch = () => watch.cancel();
    try {
      await watch.created;
    } catch (error) {
      // A lease lost while etcd was still creating its watch cancelled that watch: the loss (its
      // deadline passed, say) is the reason, not the stream's "cancelled on client".
      throw this.#lost ?? error;
    }
  }

  /** Calls `onLost(error)` once when this lease is lost (at once if it already is); the answer unsubscribes. */
  watch(onLost: (error: ContractError) => void): () => void {
    this.#listeners.add(onLost);
    const lost = this.#lost;
    if (lost !== undefined) queueMicrotask(() => onLost(lost));
    return () => this.#listeners.delete(onLost);
  }

  /** Proves, with a linearizable read, that the owner key is still this lease's; `conflict` or `unavailable` otherwise. */
  async assert(): Promise<void> {
    this.#assertLocal();
    const { kvs } = await this.#grant.client.range(this.#grant.keys.owner(this.root));
    if (!this.#holds(kvs[0])) this.#lose('conflict', 'its owner key is gone or belongs to another owner');
    this.#assertLocal();
  }

  async setPhase(phase: OwnerPhase): Promise<void> {
    const record: OwnerRecord = { ...this.#grant.owner, phase };
    const value = recordBytes(record);
    this.#written.add(Buffer.from(value).toString('hex'));
    await this.#fenced([{ put: this.#grant.keys.owner(this.root), value, lease: this.#grant.leaseId }]);
    this.#phase = phase;
  }

  /**
   * Applies `operations` in one transaction that also compares the owner key's create revision and
   * lease: it commits only while this ownership holds. Answers the transaction's revision. Queued
   * behind this lease's earlier writes (see `#fenced`).
   */
  async fencedTxn(operations: readonly FencedOperation[]): Promise<{ readonly revision: string }> {
    const reserved = operations
      .map(keyOf)
      .find((key) => key === this.#grant.keys.prefix || key.startsWith(`${this.#grant.keys.prefix}/`));
    if (reserved !== undefined)
      throw new ContractError(
        'refused',
        `fenced write: ${reserved} is under the ownership prefix, which only Leasehold writes`,
      );
    if (operations.length === 0 || operations.length > MAX_FENCED_OPERATIONS) {
      throw new ContractError('refused', `fenced write: 1 to ${MAX_FENCED_OPERATIONS} operations per transaction`);
    }
    return this.#fenced(operationsOf(operations));
  }

  /** `fencedTxn` of one put. */
  fencedPut(key: string, value: string | Uint8Array): Promise<{ readonly revision: string }> {
    return this.fencedTxn([{ put: key, value }]);
  }

  /**
   * One transaction, comparing that the owner key is still ours: deletes owner, endpoint, fence and
   * write-sequence keys; then revokes the lease. A lost lease throws (its fence stays: the root is quarantined).
   */
  release(): Promise<void> {
    // A second call while one runs shares its outcome rather than race it.
    this.#release ??= this.#releaseOnce().finally(() => {
      this.#release = undefined;
    });
    return this.#release;
  }

  async #releaseOnce(): Promise<void> {
    if (this.#state === 'released') return;
    this.#assertLocal();
    this.#state = 'releasing';
    const keys = this.#grant.keys;
    let succeeded: boolean;
    try {
      ({ succeeded } = await this.#grant.client.txn(this.#ownerCompares(), [
        { delete: keys.owner(this.root) },
        { delete: keys.endpoint(this.#grant.owner.host, this.endpoint) },
        { delete: keys.fence(this.root) },
        { delete: keys.writes(this.epoch) },
      ]));
    } catch (error) {
      this.#state = 'live';
      throw error;
    }
    if (!succeeded) {
      this.#state = 'live';
      this.#lose('conflict', 'its owner key is gone or belongs to another owner');
      this.#assertLocal();
    }
    this.#state = 'released';
    this.#stop();
    // The keys are gone; revoking only spares etcd the wait for the TTL.
    await this.#grant.client.revoke(this.#grant.leaseId).catch(() => {});
  }

  /** The ownership is closing its connection: this lease can no longer be kept. Resolves once the best-effort revoke settled. */
  abandon(): Promise<void> {
    this.#lose('unavailable', 'its ownership was closed');
    return this.#revoked;
  }

  /**
   * Runs one fenced write after the ones before it: one in flight at a time, so that the count of
   * committed writes its compare names is never raced by this owner's next write (see `#fencedNow`).
   */
  #fenced(operations: readonly Operation[]): Promise<{ readonly revision: string }> {
    const write = this.#writes.then(() => this.#fencedNow(operations));
    this.#writes = write.catch(() => {});
    return write;
  }

  /**
   * One fenced write, safe to send to several members. A member that stops answering may still apply
   * a copy it read before it stopped, after it resumes: a plain resend could then commit twice, the
   * second time after this owner's later writes. So besides the owner key the transaction compares
   * the version of this ownership's write-sequence key with the count of its committed writes, and
   * puts there this write's id: once one copy applied, every other copy fails its compare. A failure
   * that reads this id there says an earlier copy committed; another id, that a late copy of an
   * earlier write (one that answered `unavailable`) applied since: count it and send this one again.
   */
  async #fencedNow(operations: readonly Operation[]): Promise<{ readonly revision: string }> {
    const writesKey = this.#grant.keys.writes(this.epoch);
    const id = randomUUID();
    for (;;) {
      this.#assertLocal();
      const result = await this.#grant.client.repeatableTxn(
        [...this.#ownerCompares(), { key: writesKey, version: String(this.#committed) }],
        [...operations, { put: writesKey, value: new TextEncoder().encode(id), lease: this.#grant.leaseId }],
        [{ range: this.#grant.keys.owner(this.root) }, { range: writesKey }],
      );
      if (result.succeeded) {
        this.#committed += 1;
        this.#assertLocal();
        return { revision: result.revision };
      }
      if (!this.#holds(result.ranges[0]?.[0]))
        this.#lose('conflict', 'its owner key is gone or belongs to another owner: the write was refused');
      this.#assertLocal();
      const sequence = result.ranges[1]?.[0];
      this.#committed = Number(sequence?.version ?? '0');
      if (sequence !== undefined && Buffer.from(sequence.value).toString() === id)
        return { revision: sequence.modRevision };
    }
  }

  /** Whether `owner` (the owner key as read) is still this ownership's. */
  #holds(owner: KeyValue | undefined): boolean {
    return owner?.createRevision === this.sequencer.revision && owner.lease === this.#grant.leaseId;
  }

  #ownerCompares(): Compare[] {
    const key = this.#grant.keys.owner(this.root);
    return [
      { key, createRevision: this.sequencer.revision },
      { key, lease: this.#grant.leaseId },
    ];
  }

  /** Throws if released or lost, and counts the lease lost first if its local deadline has passed. */
  #assertLocal(): void {
    if (this.#state === 'released') throw new ContractError('unavailable', `the lease on ${this.root} was released`);
    this.#checkDeadline();
    if (this.#lost !== undefined) throw this.#lost;
  }

  #checkDeadline(): void {
    if (performance.now() >= this.#deadline)
      this.#lose('unavailable', 'no keep-alive was acknowledged in time: its etcd lease may have expired');
  }

  #armDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = setTimeout(
      () => {
        this.#checkDeadline();
        if (this.#lost === undefined && this.#state !== 'released') this.#armDeadline();
      },
      Math.max(0, this.#deadline - performance.now()),
    );
    this.#deadlineTimer.unref();
  }

  /**
   * A keep-alive every third of the TTL, on schedule even while earlier ones are unanswered: one that
   * hangs (a leader election) must not hold back the next, or a short TTL would run out behind it.
   */
  #scheduleKeepAlive(): void {
    this.#keepAliveTimer = setTimeout(() => {
      this.#scheduleKeepAlive();
      void this.#keepAlive();
    }, this.#grant.ttlMs / 3);
    this.#keepAliveTimer.unref();
  }

  async #keepAlive(): Promise<void> {
    let ttlSeconds: number;
    let sentAt: number;
    try {
      // An answer after the local deadline cannot help (the lease then counts as lost): wait no longer.
      ({ ttlSeconds, sentAt } = await this.#grant.client.keepAlive(
        this.#grant.leaseId,
        Math.max(1, this.#deadline - performance.now()),
      ));
    } catch {
      return; // Unanswered: the deadline decides.
    }
    if (this.#lost !== undefined || this.#state === 'released') return;
    if (ttlSeconds <= 0) {
      this.#lose('conflict', 'etcd answered that its lease is gone');
      return;
    }
    // An answer that comes after the deadline must not revive a lease already counted lost.
    this.#checkDeadline();
    if (this.#lost !== undefined) return;
    // Each answer is credited to the send time of the copy etcd answered (a hedge is sent later than the
    // first copy, and renews from later); a late answer to an earlier one never moves the deadline back.
    this.#deadline = Math.max(this.#deadline, sentAt + ttlSeconds * 1000 - this.#grant.marginMs);
    this.#armDeadline();
  }

  #onWatchEvents(events: readonly WatchEvent[]): void {
    // An owner stalled past its deadline (starved of CPU) may read the event of its lease's end before
    // its deadline timer runs: the deadline came first, and is the loss it reports.
    this.#checkDeadline();
    if (this.#state !== 'live') return;
    for (const event of events) {
      const ours =
        event.type === 'put' &&
        event.kv.createRevision === this.sequencer.revision &&
        event.kv.lease === this.#grant.leaseId &&
        this.#written.has(Buffer.from(event.kv.value).toString('hex'));
      if (!ours) {
        this.#lose(
          'conflict',
          event.type === 'delete' ? 'its owner key was deleted' : 'its owner key was written by someone else',
        );
        return;
      }
    }
  }

  #lose(code: 'conflict' | 'unavailable', reason: string): void {
    if (this.#lost !== undefined || this.#state === 'released') return;
    const lost = new ContractError(code, `lost the ownership of ${this.root}: ${reason}`);
    this.#lost = lost;
    this.#stop();
    // Best effort: whatever etcd still keeps on the lease goes now rather than at its TTL; the fence stays.
    this.#revoked = this.#grant.client.revoke(this.#grant.leaseId).catch(() => {});
    for (const listener of this.#listeners) queueMicrotask(() => listener(lost));
  }

  #stop(): void {
    clearTimeout(this.#deadlineTimer);
    clearTimeout(this.#keepAliveTimer);
    this.#cancelWatch?.();
    this.#onEnd(this);
  }
}

export function keyOf(operation: FencedOperation): string {
  return 'put' in operation ? operation.put : operation.delete;
}

function bytesOf(value: string | Uint8Array): Uint8Array {
  return typeof value === 'string' ? new TextEncoder().encode(value) : value;
}

/** The etcd operations of fenced writes. */
export function operationsOf(operations: readonly FencedOperation[]): Operation[] {
  return operations.map((operation) =>
    'put' in operation ? { put: operation.put, value: bytesOf(operation.value) } : operation,
  );
}
