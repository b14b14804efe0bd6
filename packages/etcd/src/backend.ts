import { randomUUID } from 'node:crypto';
import {
  ContractError,
  backendSchema,
  decode,
  encode,
  endpoint as endpointSchema,
  sameBackend,
  acquireInTurn,
  sha256,
  watchInspections,
  type AcquireRequest,
  type Backend,
  type FencedProcess,
  type Holder,
  type Inspection,
  type ListedOwner,
  type LocalAccess,
  type OwnerConfig,
  type OwnerSummary,
  type Ownership,
  type OwnershipLease,
  type Phase,
  type RecoverRequest,
  type Recovery,
  type RecoveryFenceView,
  type RecoveryHolderView,
  type RecoveryJournalEntry,
  type RecoveryResult,
  type RecoveryView,
  type WaitingLine,
  type WatchOptions,
  type WatchSnapshot,
  type WatchSource,
} from '@leasehold/contracts';
import type { OwnerStatus } from '@leasehold/private-files';
import type { FenceRecord, OwnerRecord } from './documents.js';
import type { EtcdFence, FencedOperation, Sequencer } from './etcd-fence.js';
import { keyLayout, type KeyLayout } from './keys.js';
import type { EtcdBackendOptions } from './backend-options.js';
import { EtcdOwnership, type EtcdInspection, type EtcdRecoveryView } from './ownership.js';

// The etcd backend behind the seam: the cross-host fence in etcd, composed with this host's own
// file backend for what must never leave the host (the capability, the checkout lock, the owner
// config). etcd is always the outer fence: it is taken first and given back last, so that at every
// step between, every other host is kept out by etcd alone.

/** An ownership through `etcdBackend`: its etcd fencing token besides the seam's lease. */
export interface EtcdBackendLease extends OwnershipLease {
  /** The etcd acquire's `{ root, cluster, revision }`, for downstream resources to check. */
  readonly sequencer: Sequencer;
  /**
   * Applies 1 to 127 `operations` to keys kept in etcd, outside the state home's prefix, in one
   * transaction that commits only while this lease holds the root. Answers its revision.
   */
  fencedTxn(operations: readonly FencedOperation[]): Promise<{ readonly revision: string }>;
  /** `fencedTxn` of one put. */
  fencedPut(key: string, value: string | Uint8Array): Promise<{ readonly revision: string }>;
}

/** The ownership and recovery of one state home whose roots are fenced in etcd across hosts. */
export interface EtcdBackend extends Ownership, Recovery {
  acquire(root: string, config: OwnerConfig, request?: AcquireRequest): Promise<EtcdBackendLease>;
}

/**
 * The etcd backend of a state home, over this host's `local` file backend.
 * @throws ContractError `refused` for malformed options, or a `local` opened with another backend.
 */
export function etcdBackend(options: EtcdBackendOptions): EtcdBackend {
  const backend = decode(
    backendSchema,
    { kind: 'etcd', endpoints: [...options.endpoints], prefix: options.prefix },
    'backend',
  );
  if (!sameBackend(options.local.backend, backend)) {
    throw new ContractError(
      'refused',
      `local: opened with backend ${JSON.stringify(options.local.backend)}, not this one's ${JSON.stringify(backend)}`,
    );
  }
  return new CompositeBackend(backend, options);
}

class CompositeBackend implements EtcdBackend {
  readonly stateHome: string;
  readonly backend: Backend;
  readonly #etcd: EtcdOwnership;
  readonly #keys: KeyLayout;
  readonly #local: Ownership;
  readonly #localRecovery: Recovery;
  readonly #acquireOptions: { readonly ttlSeconds?: number; readonly marginMs?: number };

  constructor(backend: Backend, options: EtcdBackendOptions) {
    this.backend = backend;
    this.stateHome = options.local.stateHome;
    this.#local = options.local;
    this.#localRecovery = options.localRecovery;
    this.#keys = keyLayout(options.prefix);
    this.#acquireOptions = {
      ...(options.ttlSeconds === undefined ? {} : { ttlSeconds: options.ttlSeconds }),
      ...(options.marginMs === undefined ? {} : { marginMs: options.marginMs }),
    };
    this.#etcd = new EtcdOwnership(options);
  }

  /**
   * Crash-safety order: the etcd fence FIRST (a crash after it leaves a fence that every host
   * respects, quarantined once the lease ends), then the local files. A local acquire that fails
   * has rolled itself back; the etcd lease is then given back, so the root is free again. A wait
   * (`waitMs`) waits in the root's line in etcd, shared by every host.
   */
  async acquire(root: string, config: OwnerConfig, request: AcquireRequest = {}): Promise<EtcdBackendLease> {
    const { waitMs = 0, signal, onWait, ...now } = request;
    const attempt = () => this.#acquireNow(root, config, now);
    return waitMs > 0 ? acquireInTurn(this.#waitingLine(root), attempt, { waitMs, signal, onWait }) : attempt();
  }

  async #acquireNow(
    root: string,
    config: OwnerConfig,
    request: Omit<AcquireRequest, 'waitMs' | 'signal' | 'onWait'>,
  ): Promise<EtcdBackendLease> {
    const endpoint = request.boundEndpoint ?? config.endpoint;
    // etcd keys endpoints per host, so it must be the one actually bound, never a port-0 request.
    if (!endpointSchema.safeParse(endpoint).success)
      throw new ContractError('conflict', 'bound endpoint: not concrete, or not the endpoint the config asks for');
    // One ownership, one epoch: the files take the epoch the etcd fence was written with.
    const epoch = request.epoch ?? randomUUID();
    const fence = await this.#etcd.acquire(root, { endpoint, epoch, ...this.#acquireOptions });
    try {
      return new CompositeLease(
        fence,
        await this.#local.acquire(root, config, { ...request, boundEndpoint: endpoint, epoch }),
      );
    } catch (error) {
      // Best effort: a release that fails leaves the fence on a lease this process keeps; close() revokes it (quarantined).
      await fence.release().catch(() => {});
      throw error;
    }
  }

  /** The root's line in etcd, across hosts; the holder as `inspect` tells it. */
  #waitingLine(root: string): WaitingLine {
    return {
      root,
      stateHome: this.stateHome,
      join: () => this.#etcd.joinLine(root, this.#acquireOptions.ttlSeconds),
      inspect: () => this.inspect(root),
      commandLine: (owner) => this.#etcd.commandLine(root, owner),
    };
  }

  /** How many wait in the root's line in etcd, on every host. */
  waiters(root: string): Promise<number> {
    return this.#etcd.waiters(root);
  }

  /**
   * Woken by both places `inspect` reads: etcd's keys of the root (a watch from the revision of a
   * read on; a compacted or ended stream is a gap) and this host's files (the file backend's own
   * watch, whose gaps are this one's).
   */
  watch(root: string, options: WatchOptions = {}): AsyncIterable<WatchSnapshot> {
    const wakeups: WatchSource = (wakeup) => {
      const stopKeys = this.#etcd.watchKeys(root, wakeup);
      const files = new AbortController();
      void (async () => {
        const local = this.#local.watch(root, { ...options, signal: files.signal });
        for await (const snapshot of local) {
          if (snapshot.resync === true) wakeup.gap();
          // Its first is the state it began on, no change: the folders are watched from before this watch's first read.
          else if (snapshot.seq > 1) wakeup.changed();
        }
      })();
      return () => {
        stopKeys();
        files.abort();
      };
    };
    return watchInspections(() => this.inspect(root), wakeups, options);
  }

  /** etcd decides across hosts; this host's files decide for this host's own owner. Never throws. */
  async inspect(root: string): Promise<Inspection> {
    let fenced: EtcdInspection;
    try {
      fenced = await this.#etcd.inspect(root);
    } catch (error) {
      if (!ContractError.is(error)) throw error;
      return { status: 'unavailable', reason: `${error.code}: ${error.message}` };
    }
    switch (fenced.status) {
      case 'absent':
        return this.#local.inspect(root);
      case 'unavailable':
        return { status: 'unavailable', reason: `etcd: ${fenced.reason}` };
      case 'quarantined':
        return { status: 'quarantined', owner: this.#summaryOf(fenced.owner ?? fenced.fence, 'quarantined') };
      default:
        return fenced.owner.host === this.#etcd.host
          ? this.#inspectHere(root, fenced.owner)
          : inspectElsewhere(fenced.owner, fenced.version);
    }
  }

  /** This host holds the etcd fence: its files tell the rest, unless they are not (or no longer) written. */
  async #inspectHere(root: string, owner: OwnerRecord): Promise<Inspection> {
    const here = await this.#local.inspect(root);
    if (here.status !== 'absent' && here.status !== 'stopped') return here;
    // Acquire writes etcd before the files and release removes the files before etcd: a live lease between the two.
    return {
      status: 'unavailable',
      reason: 'fenced in etcd by this host, its files not (or no longer) written: an acquire or release in progress',
      owner: this.#summaryOf(owner, owner.phase),
      inProgress: true,
    };
  }

  /** A record's owner, with what this host can tell of its process: another host's is `ambiguous`. */
  #summaryOf(record: FenceRecord | OwnerRecord, phase: Phase): OwnerSummary {
    return summaryOf(record, phase, this.#etcd.processOf(record) ?? 'ambiguous');
  }

  initialize(root: string, config: OwnerConfig): Promise<void> {
    return this.#local.initialize(root, config);
  }

  configuration(root: string): Promise<OwnerConfig | undefined> {
    return this.#local.configuration(root);
  }

  localAccess(root: string): Promise<LocalAccess> {
    return this.#local.localAccess(root);
  }

  /** The capability stays in this host's files: the local backend's file. */
  capabilityFile(root: string): string {
    return this.#local.capabilityFile(root);
  }

  /** This host's workspaces, from its files: another host's stopped workspaces leave nothing in etcd. */
  async workspaces(): Promise<string[]> {
    return this.#local.workspaces();
  }

  /** Every etcd fence, then this host's rows etcd does not fence (a local leftover). */
  async list(): Promise<ListedOwner[]> {
    const fenced = (await this.#etcd.list()).map(({ root, fence, owner }): ListedOwner => ({
      root,
      endpoint: fence.endpoint,
      epoch: fence.epoch,
      pid: fence.pid,
      host: fence.host,
      verdict: owner === undefined ? 'lease-ended' : 'leased',
    }));
    const roots = new Set(fenced.map((row) => row.root));
    return [...fenced, ...(await this.#local.list()).filter((row) => !roots.has(row.root))];
  }

  async view(root: string): Promise<RecoveryView> {
    return (await this.#views(root)).view;
  }

  /** A process of this host, as this host's files' recovery judges it: etcd knows nothing of processes. */
  fencedProcess(holder: Holder): FencedProcess {
    return this.#localRecovery.fencedProcess(holder);
  }

  /**
   * Crash-safety order: this host's files first (with their own digest and journal), the etcd fence
   * LAST (its own journal record), so that a recovery stopped part-way still keeps every other host out.
   */
  async recover(root: string, options: RecoverRequest): Promise<RecoveryResult> {
    options.assertAuthority();
    const { view, local, etcd } = await this.#views(root);
    if (view.digest !== options.expectedDigest)
      throw new ContractError(
        'conflict',
        `${root} changed since the digest was taken: take a new recovery view and its digest`,
      );
    if (etcd.owner !== undefined) {
      throw new ContractError(
        'quarantine',
        `${root} is held by a live etcd lease (host ${etcd.owner.host}, pid ${etcd.owner.pid}, epoch ${etcd.owner.epoch}): it is never recovered`,
      );
    }
    if (view.clear) return { recovered: false, reason: 'clear' };
    let record: string | undefined;
    if (!local.clear) {
      options.assertAuthority();
      const result = await this.#localRecovery.recover(root, {
        expectedDigest: local.digest,
        assertAuthority: options.assertAuthority,
        ...(options.automatic === undefined ? {} : { automatic: options.automatic }),
      });
      if (result.recovered) record = result.record;
    }
    if (!etcd.clear) {
      options.assertAuthority();
      record = (
        await this.#etcd.recover(root, etcd.digest, {
          reviewedDigest: view.digest,
          ...(options.automatic === undefined ? {} : { automatic: options.automatic }),
        })
      ).id;
    }
    return record === undefined ? { recovered: false, reason: 'clear' } : { recovered: true, record };
  }

  /** This host's file records and the prefix's etcd records (every host's), oldest first. */
  async journal(root?: string): Promise<readonly RecoveryJournalEntry[]> {
    const [local, etcd] = await Promise.all([this.#localRecovery.journal(root), this.#etcd.journal()]);
    const fromEtcd = etcd
      .filter((record) => root === undefined || record.root === root)
      .map(
        ({ id, root: recordRoot, digest, reviewedDigest, recordedAt, operator, automatic }): RecoveryJournalEntry => ({
          record: `etcd:${this.#keys.journal(id)}`,
          root: recordRoot,
          digest,
          ...(reviewedDigest === undefined ? {} : { reviewedDigest }),
          recordedAt,
          operator,
          fences: [{ kind: 'etcd-fence', path: `etcd:${this.#keys.fence(recordRoot)}` }],
          ...(automatic === undefined ? {} : { automatic }),
        }),
      );
    return [...local, ...fromEtcd].sort((a, b) => a.recordedAt.localeCompare(b.recordedAt));
  }

  async close(): Promise<void> {
    try {
      await this.#etcd.close();
    } finally {
      await this.#local.close();
    }
  }

  /** Both backends' views, and the one view (and digest) of them. */
  async #views(root: string): Promise<{ view: RecoveryView; local: RecoveryView; etcd: EtcdRecoveryView }> {
    const [local, etcd] = await Promise.all([this.#localRecovery.view(root), this.#etcd.recoveryView(root)]);
    const etcdViews = etcdFenceViews(
      etcd,
      this.#keys.fence(root),
      etcd.fence === undefined ? undefined : this.#etcd.processOf(etcd.fence.record),
    );
    const view: RecoveryView = {
      root,
      fences: [...local.fences, ...etcdViews.fences],
      holders: [...local.holders, ...etcdViews.holders],
      digest: sha256(
        encode({ schema: 'leasehold.etcd-backend-recovery-digest/1', root, local: local.digest, etcd: etcd.digest }),
      ),
      clear: local.clear && etcd.clear,
    };
    return { view, local, etcd };
  }
}

/** Another host holds the root: its files are out of reach, so an idle owner cannot be proved here. */
function inspectElsewhere(owner: OwnerRecord, version: number): Inspection {
  const summary = { ...summaryOf(owner, owner.phase, 'ambiguous'), version };
  if (owner.phase === 'stopping') return { status: 'stopping', owner: summary };
  return { status: 'unavailable', reason: `served on host ${owner.host}`, owner: summary };
}

function summaryOf(record: FenceRecord | OwnerRecord, phase: Phase, process: OwnerStatus): OwnerSummary {
  return { epoch: record.epoch, endpoint: record.endpoint, pid: record.pid, host: record.host, phase, process };
}

/**
 * The etcd fence as recovery shows it, and its holder: `leased` while an owner key is there,
 * `lease-ended` once it is gone; for a fence of this host, what this host can tell of its `process`.
 */
function etcdFenceViews(
  snapshot: EtcdRecoveryView,
  key: string,
  process: OwnerStatus | undefined,
): { fences: RecoveryFenceView[]; holders: RecoveryHolderView[] } {
  if (snapshot.fence === undefined) return { fences: [], holders: [] };
  const { pid, host, processStart } = snapshot.fence.record;
  const holder = { pid, host, ...(processStart === undefined ? {} : { processStart }) };
  const path = `etcd:${key}`;
  return {
    fences: [
      { kind: 'etcd-fence', path, holder, ...(snapshot.owner === undefined ? {} : { phase: snapshot.owner.phase }) },
    ],
    holders: [
      {
        holder,
        verdict: snapshot.owner === undefined ? 'lease-ended' : 'leased',
        ...(process === undefined ? {} : { process }),
        fences: [path],
      },
    ],
  };
}

/** One ownership through the composite: the etcd fence outside, this host's files inside. */
class CompositeLease implements EtcdBackendLease {
  readonly root: string;
  readonly sequencer: Sequencer;
  readonly #fence: EtcdFence;
  readonly #local: OwnershipLease;
  #localReleased = false;

  constructor(fence: EtcdFence, local: OwnershipLease) {
    this.root = local.root;
    this.sequencer = fence.sequencer;
    this.#fence = fence;
    this.#local = local;
  }

  get owner(): OwnerSummary {
    return this.#local.owner;
  }

  /** The cross-host fence first: a lost etcd lease must be reported whatever the files say. */
  async assert(): Promise<void> {
    await this.#fence.assert();
    await this.#local.assert();
  }

  /** The files first, then etcd: a phase other hosts see is one this host's owner already wrote. */
  async phase(phase: Exclude<Phase, 'stopped'>): Promise<void> {
    await this.#local.phase(phase);
    await this.#fence.setPhase(phase);
  }

  /**
   * The files FIRST, then etcd: the cross-host fence goes last. A local release that failed leaves
   * the etcd fence held, so no other host enters; calling again resumes where it stopped.
   */
  async release(): Promise<void> {
    if (!this.#localReleased) {
      await this.#local.release();
      this.#localReleased = true;
    }
    await this.#fence.release();
  }

  /** Both watches; `onLost` is called once, for whichever loss comes first, and stops both. */
  watch(intervalMs: number, onLost: (error: unknown) => void): () => void {
    let lost = false;
    const stops: (() => void)[] = [];
    const stop = (): void => {
      for (const one of stops.splice(0)) one();
    };
    const once = (error: unknown): void => {
      if (lost) return;
      lost = true;
      stop();
      onLost(error);
    };
    stops.push(this.#fence.watch(once), this.#local.watch(intervalMs, once));
    // A watch that reported at once (before both were set up) must still stop the other.
    if (lost) stop();
    return stop;
  }

  localAccess(): LocalAccess {
    return this.#local.localAccess();
  }

  // etcd alone fences these writes: they are the owner's data in the cluster, not this host's files.
  fencedTxn(operations: readonly FencedOperation[]): Promise<{ readonly revision: string }> {
    return this.#fence.fencedTxn(operations);
  }

  fencedPut(key: string, value: string | Uint8Array): Promise<{ readonly revision: string }> {
    return this.#fence.fencedPut(key, value);
  }

  /** This host's files hold the companion (a process of this host); the etcd fence stays the owner's alone. */
  async fenceProcess(pid: number): Promise<void> {
    await this.#local.fenceProcess(pid);
  }
}
