import type { Backend } from './backend.js';
import { ContractError } from './contract-error.js';
import type { AutomaticRecovery, Holder, OwnerConfig, Phase } from './documents.js';
import type { WatchOptions, WatchSnapshot } from './watch.js';

// The seam between the places that own workspaces (the files of one host, or an etcd cluster
// shared by hosts) and what runs on them (the transport, the CLI). Every backend implements
// these; nothing above the seam knows which one it has.

/** Who holds a workspace (never the capability). */
export interface OwnerSummary {
  readonly epoch: string;
  readonly endpoint: string;
  readonly pid: number;
  readonly host: string;
  readonly phase: Phase;
  /**
   * The backend's verdict on the owner's process, judged on this host by its pid, start time, boot
   * and PID namespace (as `list` and recovery judge it): `live`; `absent`, proved gone (exited, a
   * zombie not yet reaped, its pid reused, another boot); `ambiguous`, it cannot be told from here
   * (another host, another PID namespace). Only `absent` proves it gone; it says nothing of why.
   */
  readonly process: 'live' | 'absent' | 'ambiguous';
  /**
   * How many times this ownership's record was written: 1 once acquired, one more with each phase
   * after (and the release's `stopped`). A backend that counts them sets it: a watch that sees it
   * grow by more than one knows it passed over a phase.
   */
  readonly version?: number;
}

/**
 * An ownership of a folder as its own mark names it (SPEC 5.1a): one made through another state
 * home or backend, which that state home's files or keys say more of. Never a secret.
 */
export interface MarkedOwnership {
  /** The marked folder: the workspace itself, or a folder above it. */
  readonly root: string;
  readonly stateHome: string;
  readonly backend: 'files' | 'etcd';
  readonly epoch: string;
  readonly pid: number;
  readonly host: string;
  /** The verdict on the process the mark names, judged on this host (see `OwnerSummary.process`). */
  readonly process: 'live' | 'absent' | 'ambiguous';
  /**
   * The state home whose recovery removes this mark once its holder is proved gone: the one it
   * names, or, once that one is gone (deleted, another container's), the one that read it.
   */
  readonly recoverIn: string;
  /** The user whose mark it is (the file's owner), and in words: `alice (uid 1000)`. */
  readonly uid: number;
  readonly user: string;
}

/** What a backend can tell of a workspace without asking its owner. */
export type Inspection =
  | { readonly status: 'absent' }
  | {
      readonly status: 'stopped';
      readonly epoch: string | null;
      /** The stopped record's `version` (see `OwnerSummary`), where the backend counts them. */
      readonly version?: number;
    }
  | { readonly status: 'stopping' | 'quarantined'; readonly owner: OwnerSummary }
  | {
      readonly status: 'unavailable';
      readonly reason: string;
      readonly owner?: OwnerSummary;
      /**
       * True when the state is between two steps of a live process's acquire
       * or release of this workspace: a passing state, worth asking again about.
       */
      readonly inProgress?: true;
      /** The ownership the folder's mark (or a mark above it) names, when it is not one of this state home's. */
      readonly marked?: MarkedOwnership;
    };

/** What a local client needs to reach the owner. Holds the secret: never print it. */
export interface LocalAccess {
  readonly endpoint: string;
  readonly epoch: string;
  readonly capability: string;
}

/** Handed to `initializeNew` for a workspace that had no service state. */
export interface NewWorkspace {
  readonly root: string;
  /**
   * Publishes `host-config.json`, whose identity must be the config's `policyIdentity`.
   * @throws ContractError `refused` for other bytes (nothing written).
   */
  writeHostConfig(bytes: Uint8Array): void;
}

/** How to acquire, beyond the config. */
export interface AcquireRequest {
  /** The endpoint the owner actually bound (default the config's endpoint); it must be concrete. */
  readonly boundEndpoint?: string;
  /** Runs once for a workspace that had no service state, before anything else is written for it. */
  readonly initializeNew?: (fresh: NewWorkspace) => void;
  /**
   * The epoch of this ownership (default a fresh random id). For a backend that fenced the root
   * elsewhere first under that epoch, so that one ownership has one epoch everywhere: a fresh
   * random id each time, never one used before.
   */
  readonly epoch?: string;
  /**
   * An upgrade: a stopped workspace whose config is another takes this one (compare-and-swap
   * on the config read, and only with no fence left: every refusal still applies). Without it,
   * another config is `conflict`.
   */
  readonly replaceConfig?: boolean;
  /**
   * How long to wait, in milliseconds, for a live owner to release (default 0: answer at once).
   * Waiters are served first come, first served; a quarantine is never waited for.
   */
  readonly waitMs?: number;
  /** Ends a wait: the call rejects with the signal's reason, and leaves nothing behind. */
  readonly signal?: AbortSignal;
  /** Told when a wait begins and about once a second while it lasts (see `WaitState`). */
  readonly onWait?: (wait: WaitState) => void;
}

/** What a waiting `acquire` is told: who holds the workspace, and how long it has waited. */
export interface WaitState {
  /** The owner it waits for; undefined when none is live (the waiters ahead of it are being served). */
  readonly holder?: {
    readonly pid: number;
    readonly host: string;
    /** Its arguments, program first, where this host can read them (its own processes, on Linux). */
    readonly commandLine: readonly string[] | null;
    /** ISO 8601: when this wait first saw it hold the workspace (the files record no time). */
    readonly since: string;
  };
  /** Waiters ahead of this one (0: it is next). */
  readonly ahead: number;
  readonly waitedMs: number;
}

/** One ownership of a workspace, as any backend holds it. */
export interface OwnershipLease {
  readonly root: string;
  /** The owner as it stands; `phase` is the one it last wrote. */
  readonly owner: OwnerSummary;
  /** Proves this process still owns the workspace. @throws ContractError when it does not (`conflict`, `unavailable`). */
  assert(): Promise<void>;
  /** Writes the phase, compare-and-swap against what this owner wrote. */
  phase(phase: Exclude<Phase, 'stopped'>): Promise<void>;
  /** Gives the workspace back, every fence in its order; a release that failed part-way can be called again. */
  release(): Promise<void>;
  /** Calls `onLost(error)` once when the ownership is lost (re-checked every `intervalMs`); the answer stops watching. */
  watch(intervalMs: number, onLost: (error: unknown) => void): () => void;
  /** Endpoint, epoch and capability of this owner. Holds the secret. */
  localAccess(): LocalAccess;
  /**
   * Fences the workspace with process `pid` of this host too (its start time read now), durably,
   * before it returns: until that process is gone, a recovery reports it `live` and refuses.
   * Release removes this fence first. Call it for a child whose every action needs the workspace,
   * before letting it act. One per lease.
   * @throws ContractError `refused` (the process is gone, or the lease already fences one), and what `assert` throws.
   */
  fenceProcess(pid: number): Promise<void>;
}

/** One fenced workspace of `list()`, and whether what holds it is still there. */
export interface ListedOwner {
  readonly root: string;
  readonly endpoint: string;
  readonly epoch: string;
  readonly pid: number;
  readonly host: string;
  /** What holds it, and whether that is still there. */
  readonly verdict: Verdict;
}

/**
 * What this host can tell of a holder. `live`, `absent`, `ambiguous`: its process, by pid and start
 * time. `leased`: a live etcd lease holds it (on any host). `lease-ended`: its lease is gone and its
 * fence stays, quarantined.
 */
export type Verdict = 'live' | 'absent' | 'ambiguous' | 'leased' | 'lease-ended';

/** The ownership of workspaces in one state home, whichever backend keeps it. */
export interface Ownership {
  readonly stateHome: string;
  readonly backend: Backend;
  /** Never throws: what it cannot prove is `unavailable`. */
  inspect(root: string): Promise<Inspection>;
  /** Publishes the workspace's config; idempotent for the same config. */
  initialize(root: string, config: OwnerConfig): Promise<void>;
  /** Becomes the workspace's owner, on the request's bound endpoint. */
  acquire(root: string, config: OwnerConfig, request?: AcquireRequest): Promise<OwnershipLease>;
  /**
   * How many wait in line for `root` (see `AcquireRequest.waitMs`), waiters proved gone not
   * counted. Changes nothing.
   * @throws ContractError `refused` (an unsafe or malformed ticket, a root that is not absolute and
   * normalised), `unavailable` (a backend it cannot reach).
   */
  waiters(root: string): Promise<number>;
  /** The workspace's config, or undefined before `initialize`. */
  configuration(root: string): Promise<OwnerConfig | undefined>;
  /** What a client of this host needs to reach the owner. @throws ContractError `unavailable`. */
  localAccess(root: string): Promise<LocalAccess>;
  /**
   * The file of this host's state home a client reads the capability of `root` from (its path,
   * never its content): every backend keeps the capability in this host's files. Reads nothing.
   */
  capabilityFile(root: string): string;
  /** Every fenced workspace. */
  list(): Promise<ListedOwner[]>;
  /**
   * Every workspace root this host's state home keeps files for, stopped ones too (each was served
   * here at least once), sorted. Changes nothing.
   */
  workspaces(): Promise<string[]>;
  /**
   * Each change in what `inspect(root)` answers, from the answer now on, until `options.signal`
   * aborts or the consumer stops iterating (see `WatchSnapshot` for what a gap looks like). Never
   * throws: what it cannot read is an `unavailable` snapshot.
   */
  watch(root: string, options?: WatchOptions): AsyncIterable<WatchSnapshot>;
  /** Lets go of connections; leases still held are lost (their fences stay). */
  close(): Promise<void>;
}

/** A fence of a workspace as recovery sees it: a file, or an etcd key; never a secret. */
export interface RecoveryFenceView {
  readonly kind: string;
  /** The file's path, or `etcd:<key>`. */
  readonly path: string;
  readonly holder?: Holder;
  readonly phase?: Phase;
}

/** A holder some fence names, and whether recovery may act for it (only `absent` and `lease-ended` may be recovered). */
export interface RecoveryHolderView {
  readonly holder: Holder;
  readonly verdict: Verdict;
  /**
   * For a holder whose `verdict` speaks of its lease (`leased`, `lease-ended`) and that names this
   * host: what this host can tell of its process. Absent otherwise.
   */
  readonly process?: 'live' | 'absent' | 'ambiguous';
  readonly fences: readonly string[];
}

/** What recovery would act on, and the digest that names exactly it. */
export interface RecoveryView {
  readonly root: string;
  readonly fences: readonly RecoveryFenceView[];
  readonly holders: readonly RecoveryHolderView[];
  readonly digest: string;
  /** Nothing to recover. */
  readonly clear: boolean;
}

/** What a recovery did: `record` names its journal record. */
export type RecoveryResult =
  { readonly recovered: false; readonly reason: 'clear' } | { readonly recovered: true; readonly record: string };

/**
 * What `recoverProvedDead` did when it recovered: the journal record, and the proof journalled
 * with it (each holder proved gone, and how), so that a starting owner can say what it recovered.
 */
export interface ProvedDeadRecovery {
  readonly recovered: true;
  readonly record: string;
  readonly automatic: AutomaticRecovery;
}

/**
 * One recovery as its journal record tells it: when, which workspace, against which digest, who
 * ran it, what it released and, for an automatic one, which processes were proved gone. No secret.
 */
export interface RecoveryJournalEntry {
  /** Where the record is: a file of the state home, or `etcd:<key>`. */
  readonly record: string;
  readonly root: string;
  readonly digest: string;
  /** The digest the operator reviewed, when this record is one part of a wider recovery (etcd's, over a host's files). */
  readonly reviewedDigest?: string;
  readonly recordedAt: string;
  readonly operator: { readonly pid: number; readonly host: string; readonly user: string };
  /** What it released: each fence's kind and its path (or `etcd:<key>`). */
  readonly fences: readonly { readonly kind: string; readonly path: string }[];
  readonly automatic?: AutomaticRecovery;
}

/**
 * What this host shows now of a process a fence names (the program a gone owner fenced its
 * workspace with, say), judged as the backend judges its holders. No secret.
 */
export interface FencedProcess {
  /** That very process: by pid and start time when the fence records one (else by pid alone), on this host only. */
  readonly verdict: 'live' | 'absent' | 'ambiguous';
  /** Its arguments, program first, read while it is proved that process (pid and start time); null where this host cannot. */
  readonly commandLine: readonly string[] | null;
  /** Its process group (a signal to `-processGroup` reaches the whole group), read as `commandLine` is; null where it cannot be. */
  readonly processGroup: number | null;
  /** Whether its pid names some process of this host now: another one when `verdict` is `absent` (the pid was reused). */
  readonly pidInUse: boolean;
}

/** The recovery of workspaces whose owner is gone, whichever backend keeps them. */
export interface Recovery {
  /** What this host shows now of the process `holder` names (a fence's holder). Changes nothing; never throws. */
  fencedProcess(holder: Holder): FencedProcess;
  /** Changes nothing but dead writers' staging leftovers. */
  view(root: string): Promise<RecoveryView>;
  /**
   * Every recovery journalled in this state home (or of `root` only), oldest first. Changes nothing.
   * @throws ContractError `refused` for a journal that is unsafe or holds what is not a record.
   */
  journal(root?: string): Promise<readonly RecoveryJournalEntry[]>;
  /**
   * Releases a dead owner's fences, only with the digest of the current view, journalled.
   * `assertAuthority` throws to deny; it runs first and before every effect.
   */
  recover(root: string, options: RecoverRequest): Promise<RecoveryResult>;
}

/** What a recovery is told: the digest reviewed, who may act, and for an automatic one its proof. */
export interface RecoverRequest {
  readonly expectedDigest: string;
  readonly assertAuthority: () => void;
  /** Set only by `recoverProvedDead`: journalled with the record, so no person is thought to have confirmed it. */
  readonly automatic?: AutomaticRecovery;
}

/** Whether this host has proved the holder's process gone: `absent`, or a lease ended with its process `absent` here. */
function provedGone(view: RecoveryHolderView): boolean {
  return view.verdict === 'absent' || (view.verdict === 'lease-ended' && view.process === 'absent');
}

/** The holders of a view that this host has not proved gone: a recovery no person confirms needs none. */
export function holdersNotProvedGone(view: RecoveryView): RecoveryHolderView[] {
  return view.holders.filter((holder) => !provedGone(holder));
}

function holderInWords({ holder, verdict, process }: RecoveryHolderView): string {
  return `pid ${holder.pid} on host ${holder.host} (${verdict}${process === undefined ? '' : `, process ${process}`})`;
}

/**
 * The recovery a starting owner may run itself (opt-in): only when every process the workspace's
 * fences name is proved gone on this host, the ordinary digest-checked recovery of that very
 * view, journalled as automatic with each proof. A live, ambiguous or other host's holder, or
 * a lease still running, is `quarantine` naming them, with nothing changed. Never by age. Answers
 * `clear` when there was nothing to recover, else the record and the proof it journalled.
 * @throws ContractError `quarantine` (a holder not proved gone), and whatever `recovery.recover` throws
 * (`conflict` when the state changed since the view, so a racing recovery is never repeated).
 */
export async function recoverProvedDead(
  recovery: Recovery,
  root: string,
): Promise<{ readonly recovered: false; readonly reason: 'clear' } | ProvedDeadRecovery> {
  const view = await recovery.view(root);
  if (view.clear) return { recovered: false, reason: 'clear' };
  const blocking = holdersNotProvedGone(view);
  if (blocking.length > 0) {
    throw new ContractError(
      'quarantine',
      `${root}: not every owner is proved gone on this host: ${blocking.map(holderInWords).join('; ')}`,
      {
        remedy:
          'wait until each of those processes is gone (or end it; a lease ends within its TTL), then start again; a process of another host or PID namespace is proved gone only there, by `leasehold recover`',
      },
    );
  }
  const proved = view.holders.map(({ holder }) => ({
    holder,
    by: holder.processStart === undefined ? ('pid' as const) : ('pid-and-start-time' as const),
  }));
  const automatic: AutomaticRecovery = { reason: 'owner-proved-dead', proved };
  const result = await recovery.recover(root, {
    expectedDigest: view.digest,
    assertAuthority: () => undefined,
    automatic,
  });
  return result.recovered ? { ...result, automatic } : result;
}
