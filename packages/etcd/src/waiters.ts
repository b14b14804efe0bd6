import { randomUUID } from 'node:crypto';
import { ContractError, claimSchema, wakeableTimer, type WaitTicket, type WatchWakeups } from '@leasehold/contracts';
import { currentProcess, type OwnerStatus } from '@leasehold/private-files';
import { decodeRecord, recordBytes } from './documents.js';
import type { EtcdClient, KeyValue } from './etcd-client.js';
import type { KeyLayout } from './keys.js';

const WAITER_SCHEMA = 'leasehold.etcd-waiter/1';

/** `leasehold.etcd-waiter/1`: a process waiting for a root, on its own lease, and since when. */
const waiterSchema = claimSchema(WAITER_SCHEMA);

/** What this host can tell of a waiter's process: only for one of this host (see `EtcdOwnership.processOf`). */
type ProcessOf = (waiter: { pid: number; host: string; processStart?: string | undefined }) => OwnerStatus | undefined;

/** Starts the wake-ups of a root's fence, owner and waiters' keys; answers the function that stops them. */
type WatchLine = (wakeups: WatchWakeups) => () => void;

/**
 * The waiters of the roots of one prefix, across hosts, first come, first served: each holds a key
 * under `<prefix>/waiter/<root>/`, put on a lease of its own that it keeps alive, and the line is
 * the keys in the order etcd created them. A waiter's key goes when its lease ends (its process
 * stopped keeping it: etcd's own proof, as for an owner), when it leaves, or, for a waiter of this
 * host whose process is proved gone, when another waiter removes it (compare-and-swap on the
 * revision it read): never because it is old.
 */
export class EtcdWaiters {
  readonly #client: EtcdClient;
  readonly #keys: KeyLayout;
  readonly #host: string;
  readonly #processOf: ProcessOf;

  constructor(client: EtcdClient, keys: KeyLayout, host: string, processOf: ProcessOf) {
    this.#client = client;
    this.#keys = keys;
    this.#host = host;
    this.#processOf = processOf;
  }

  /**
   * Takes a place at the end of `root`'s line, on a new lease of `ttlSeconds` kept alive until the
   * ticket is left.
   * @throws ContractError `unavailable` (etcd did not answer or grant).
   */
  async join(root: string, ttlSeconds: number, watchLine: WatchLine): Promise<WaitTicket> {
    const { id, ttlSeconds: granted } = await this.#client.grant(ttlSeconds);
    const token = randomUUID();
    const key = `${this.#keys.waiters(root)}${token}`;
    const waiter = {
      schema: WAITER_SCHEMA,
      token,
      ...currentProcess(),
      host: this.#host,
      root,
      since: new Date().toISOString(),
    };
    try {
      const { succeeded } = await this.#client.txn(
        [{ key, version: '0' }],
        [{ put: key, value: recordBytes(waiter), lease: id }],
      );
      if (!succeeded) throw new ContractError('conflict', `etcd key ${key}: already there`);
    } catch (error) {
      await this.#client.revoke(id).catch(() => {});
      throw error;
    }
    return new EtcdTicket(this, { root, key, leaseId: id, ttlSeconds: granted }, this.#client, watchLine);
  }

  /**
   * How many wait for `root`, waiters of this host proved gone not counted. Changes nothing.
   * @throws ContractError `unavailable` (etcd did not answer), `refused` (a malformed key).
   */
  async count(root: string): Promise<number> {
    return (await this.#read(root)).filter((waiter) => !waiter.gone).length;
  }

  /**
   * The keys of `root`'s line in the order they were made, once those of this host's waiters proved
   * gone are removed.
   */
  async line(root: string): Promise<string[]> {
    const waiters = await this.#read(root);
    for (const waiter of waiters.filter(({ gone }) => gone)) {
      // Compared with the revision read: a key changed since is its waiter's, not this one's to remove.
      await this.#client.txn([{ key: waiter.kv.key, modRevision: waiter.kv.modRevision }], [{ delete: waiter.kv.key }]);
    }
    return waiters.filter(({ gone }) => !gone).map(({ kv }) => kv.key);
  }

  async #read(root: string): Promise<{ kv: KeyValue; gone: boolean }[]> {
    const { kvs } = await this.#client.range(this.#keys.waiters(root), true);
    return [...kvs]
      .sort((a, b) => (BigInt(a.createRevision) < BigInt(b.createRevision) ? -1 : 1))
      .map((kv) => {
        const waiter = decodeRecord(waiterSchema, kv.value, kv.key);
        if (waiter.root !== root) throw new ContractError('refused', `etcd key ${kv.key}: names another root`);
        return { kv, gone: this.#processOf(waiter) === 'absent' };
      });
  }
}

/** One waiter's key, kept alive, and what wakes it: a change of the root's keys or of its line. */
class EtcdTicket implements WaitTicket {
  readonly #waiters: EtcdWaiters;
  readonly #root: string;
  readonly #key: string;
  readonly #leaseId: string;
  readonly #client: EtcdClient;
  readonly #keepAlive: NodeJS.Timeout;
  readonly #stopWatch: () => void;
  #lost = false;
  #woken = false;
  #wake: () => void = () => {};

  constructor(
    waiters: EtcdWaiters,
    ticket: { readonly root: string; readonly key: string; readonly leaseId: string; readonly ttlSeconds: number },
    client: EtcdClient,
    watchLine: WatchLine,
  ) {
    this.#waiters = waiters;
    this.#root = ticket.root;
    this.#key = ticket.key;
    this.#leaseId = ticket.leaseId;
    this.#client = client;
    const wake = (): void => {
      this.#woken = true;
      this.#wake();
    };
    this.#stopWatch = watchLine({ changed: wake, gap: wake });
    // Three keep-alives a TTL: one lost answer does not end the lease.
    this.#keepAlive = setInterval(() => void this.#renew(wake), (ticket.ttlSeconds * 1000) / 3);
    this.#keepAlive.unref();
  }

  async ahead(): Promise<number> {
    if (this.#lost) return -1;
    return (await this.#waiters.line(this.#root)).indexOf(this.#key);
  }

  async changeOrTimeout(ms: number, signal?: AbortSignal): Promise<void> {
    if (!this.#woken) {
      const timer = wakeableTimer(ms, signal);
      this.#wake = timer.wake;
      try {
        await timer.ended;
      } finally {
        timer.clear();
        this.#wake = () => {};
      }
    }
    this.#woken = false;
  }

  async leave(): Promise<void> {
    clearInterval(this.#keepAlive);
    this.#stopWatch();
    // Its key goes with its lease; a revoke that does not reach etcd leaves it until the lease ends.
    await this.#client.revoke(this.#leaseId).catch(() => {});
  }

  async #renew(wake: () => void): Promise<void> {
    try {
      const { ttlSeconds } = await this.#client.keepAlive(this.#leaseId);
      if (ttlSeconds > 0) return;
      this.#lost = true;
      wake();
    } catch {
      // Not answered: the next keep-alive tries again, and a lease that ended meanwhile answers so.
    }
  }
}
