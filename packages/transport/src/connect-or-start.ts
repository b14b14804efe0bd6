import {
  ContractError,
  placeOptions,
  recoverRemedy,
  wakeableTimer,
  type Inspection,
  type OwnerSummary,
  type Ownership,
} from '@leasehold/contracts';
import {
  currentProcess,
  describeHolder,
  ownerStatus,
  processIdentity,
  type ProcessIdentity,
} from '@leasehold/private-files';
import { connect, settledInspection, type ConnectOptions, type Connection } from './client.js';
import { givenOwnership } from './ownership-option.js';
import { StartClaim, type ClaimHolder } from './start-claim.js';

/** Who a `connectOrStart` call is waiting on, as its `onWait` is told. */
export interface WaitingOn {
  /**
   * `start-claim`: another caller (in any process, this one included) holds the start claim and
   * runs `start`. `owner`: the workspace's owner holds it but does not answer yet (it is starting
   * or stopping, or cannot be told from here).
   */
  readonly what: 'start-claim' | 'owner';
  readonly pid: number;
  readonly host: string;
  /** ISO 8601: when the claim was made; for an owner, when this call first saw it (its files record no time). */
  readonly since: string;
}

/**
 * What `start` may hand back so that the call can tell a start that failed: the process it
 * launched (a `ChildProcess`, or anything with its `pid`), or that pid.
 */
export type StartedProcess = number | { readonly pid?: number | undefined };

export interface ConnectOrStartOptions extends Omit<ConnectOptions, 'timeoutMs'> {
  /**
   * Starts the owner, typically by spawning your daemon detached; it need not wait until the
   * owner serves. Of all the callers racing for one workspace, one runs it. Return the process it
   * launched (or its pid): when that process exits before an owner answers, the call ends at once
   * with why, instead of waiting out `timeoutMs`.
   */
  readonly start: () => StartedProcess | void | Promise<StartedProcess | void>;
  /** The owner's `compatibility` this client needs (see `ServeOptions`); without it, any owner will do. */
  readonly compatibility?: string;
  /**
   * For a live owner of another compatibility: `'refuse'` (the default) throws `conflict` naming
   * both, after `waitMs`; `'replace'` stops it (`POST /v1/stop`), waits until it is stopped, then
   * starts one, once per call.
   */
  readonly onIncompatible?: 'refuse' | 'replace';
  /**
   * Under `'refuse'`: how long to wait, in milliseconds, for a live owner of another compatibility
   * to let go, counted from the first one this call met (default 0: `conflict` at once). Meanwhile
   * the call looks again each pause: a free workspace is started as usual, a compatible owner is
   * the answer. `timeoutMs` still bounds the whole call. A quarantine is never waited for.
   */
  readonly waitMs?: number;
  /**
   * Ends the call wherever it waits: it rejects with the signal's reason, removes the start claim
   * if it holds it, and leaves nothing behind (a `start` already running is not cancelled).
   */
  readonly signal?: AbortSignal;
  /** Told who this call waits on, once for each holder it meets (a new claim, a new owner). */
  readonly onWait?: (waitingOn: WaitingOn) => void;
  /** Bound of the whole call, `start` included, in milliseconds (default 30000). */
  readonly timeoutMs?: number;
  /** Bound of one request to the owner, in milliseconds (default 3000): `connect`'s `timeoutMs`. */
  readonly requestTimeoutMs?: number;
}

const POLL_MS = 50;

/** The bound of one call, its signal, and the holders its `onWait` was told about. */
class Bound {
  readonly #workspace: string;
  readonly #timeoutMs: number;
  readonly #deadline: number;
  readonly #signal: AbortSignal | undefined;
  readonly #onWait: ((waitingOn: WaitingOn) => void) | undefined;
  readonly #firstSeen = new Map<string, string>();
  #told: string | undefined;

  constructor(workspace: string, options: ConnectOrStartOptions) {
    this.#workspace = workspace;
    this.#timeoutMs = options.timeoutMs ?? 30000;
    this.#deadline = Date.now() + this.#timeoutMs;
    this.#signal = options.signal;
    this.#onWait = options.onWait;
  }

  /** @throws the signal's reason once it aborted. */
  check(): void {
    this.#signal?.throwIfAborted();
  }

  /** Waits a little before the next look; at the bound, `unavailable` naming what it waited for; on abort, its reason. */
  async pause(waitedFor: string): Promise<void> {
    const left = this.#deadline - Date.now();
    if (left <= 0) throw this.#expired(waitedFor);
    const timer = wakeableTimer(Math.min(left, POLL_MS * (0.5 + Math.random())), this.#signal);
    try {
      await timer.ended;
    } finally {
      timer.clear();
    }
    this.check();
  }

  /**
   * `work`, or `unavailable` once the bound passes first, or the signal's reason once it aborts
   * first (the work goes on: it cannot be stopped from here).
   */
  race<T>(work: Promise<T>, waitedFor: string): Promise<T> {
    return this.#first(work, { milliseconds: Math.max(0, this.#deadline - Date.now()), waitedFor });
  }

  /** `work`, or the signal's reason once it aborts first: a read or one request, which bound themselves. */
  abortable<T>(work: Promise<T>): Promise<T> {
    return this.#first(work, undefined);
  }

  async #first<T>(work: Promise<T>, bound: { milliseconds: number; waitedFor: string } | undefined): Promise<T> {
    const timer = wakeableTimer(bound?.milliseconds, this.#signal);
    const ended = timer.ended.then(() => {
      this.check();
      // Only a bound ends the timer without an abort.
      throw this.#expired(bound?.waitedFor ?? '');
    });
    try {
      return await Promise.race([work, ended]);
    } finally {
      timer.clear();
    }
  }

  /** Tells `onWait` of a claim's maker, unless it was the last holder told. */
  claimHolder(holder: ClaimHolder): void {
    this.#tell(`claim ${holder.token}`, {
      what: 'start-claim',
      pid: holder.pid,
      host: holder.host,
      since: holder.since,
    });
  }

  /** Tells `onWait` of an owner, unless it was the last holder told; `since` is when this call first saw it. */
  owner(owner: Pick<OwnerSummary, 'epoch' | 'pid' | 'host'>): void {
    const key = `owner ${owner.epoch}`;
    const since = this.#firstSeen.get(key) ?? new Date().toISOString();
    this.#firstSeen.set(key, since);
    this.#tell(key, { what: 'owner', pid: owner.pid, host: owner.host, since });
  }

  #tell(key: string, waitingOn: WaitingOn): void {
    if (this.#told === key) return;
    this.#told = key;
    this.#onWait?.(waitingOn);
  }

  #expired(waitedFor: string): ContractError {
    return new ContractError(
      'unavailable',
      `${this.#workspace}: no owner answered within ${this.#timeoutMs} ms; waited for ${waitedFor}`,
    );
  }
}

/** The owner the files name, if any. */
function ownerOf(inspection: Inspection): OwnerSummary | undefined {
  return inspection.status === 'absent' || inspection.status === 'stopped' ? undefined : inspection.owner;
}

/**
 * Whether a new owner may be started: nobody holds the workspace, or the backend proved its owner's
 * process gone (a daemon started with `recoverDead` recovers it; any other is refused `quarantine`).
 * An owner that cannot be told, or a state between two steps with no owner named, is waited on.
 */
function free(inspection: Inspection): boolean {
  if (inspection.status === 'absent' || inspection.status === 'stopped') return true;
  return ownerOf(inspection)?.process === 'absent';
}

/**
 * The state a start would change, in one word: absent, or the epoch the files record. A start that
 * brought an owner up (or one that came and went) leaves another.
 */
function stateKey(inspection: Inspection): string {
  if (inspection.status === 'absent') return 'absent';
  return inspection.status === 'stopped' ? `stopped ${inspection.epoch}` : `held ${ownerOf(inspection)?.epoch}`;
}

/**
 * Why a start ended with no owner, as the start itself was refused: `quarantine` when the state
 * holds the fences of an owner whose process is gone (a start refuses them unless it recovers them),
 * else `unavailable`. Every caller that waited on that start words it the same way.
 */
function failedStart(workspace: string, stateHome: string, inspection: Inspection, what: string): ContractError {
  const gone = ownerOf(inspection);
  if (gone !== undefined && free(inspection)) {
    return new ContractError(
      'quarantine',
      `${workspace}: ${what}; the fences of an owner whose process is gone, ${describeHolder(gone, gone.process)}, remain, ` +
        'and a start refuses them unless it recovers them (recoverDead)',
      { remedy: recoverRemedy(workspace, stateHome, 'absent') },
    );
  }
  return new ContractError('unavailable', `${workspace}: ${what} (the workspace is ${described(inspection)})`, {
    remedy: `read the started program's own output, where your start() keeps it, for why it ended; then \`leasehold status ${placeOptions(workspace, stateHome)}\``,
  });
}

/**
 * The process a `start` launched: a child of this process by how it exited (code 0 is a launcher
 * that handed over to the daemon it started, and says nothing of the start), any other by its pid
 * and start time (never a pid reused since).
 */
class Launched {
  readonly #started: StartedProcess;
  readonly #pid: number | undefined;
  readonly #identity: ProcessIdentity | undefined;

  constructor(started: StartedProcess) {
    this.#started = started;
    this.#pid = typeof started === 'number' ? started : started.pid;
    this.#identity = this.#pid === undefined || isChild(started) ? undefined : processIdentity(this.#pid);
  }

  /** Whether it is gone (exited, a zombie, or never started) without handing over. */
  failed(): boolean {
    const started = this.#started;
    // A child of this process: how it ended is known once it is reaped.
    if (isChild(started)) return started.signalCode !== null || (started.exitCode !== null && started.exitCode !== 0);
    const identity = this.#identity;
    return identity === undefined || ownerStatus(identity.pid, identity.host, identity.processStart) === 'absent';
  }

  /** It in words: its pid and, for a child of this process, how it exited. */
  toString(): string {
    const started = this.#started;
    const exit = !isChild(started)
      ? 'exited'
      : started.signalCode !== null
        ? `was killed by ${started.signalCode}`
        : `exited with code ${started.exitCode}`;
    return `the process start() launched (pid ${this.#pid ?? 'none'}) ${exit} before an owner answered`;
  }
}

/** A child process of this one (a `ChildProcess`), whose exit this process learns once it reaps it. */
interface StartedChild {
  readonly pid?: number | undefined;
  readonly exitCode: number | null;
  readonly signalCode: NodeJS.Signals | null;
}

function isChild(started: StartedProcess): started is StartedChild {
  return typeof started === 'object' && 'exitCode' in started && 'signalCode' in started;
}

function described(inspection: Inspection): string {
  return inspection.status === 'unavailable' ? `unavailable: ${inspection.reason}` : inspection.status;
}

/** A proven owner, or why there is none (`connect`'s `unavailable` message). */
async function reach(workspace: string, options: ConnectOptions): Promise<Connection | string> {
  try {
    return await connect(workspace, options);
  } catch (error) {
    if (ContractError.is(error, 'unavailable')) return error.message;
    throw error;
  }
}

function servedBy(connection: Connection): string {
  const served = connection.status.compatibility;
  return served === undefined ? 'none' : JSON.stringify(served);
}

/** `conflict` naming both compatibilities, and how long this call waited for that owner to let go, if it did. */
function incompatible(workspace: string, connection: Connection, wanted: string, waitedMs?: number): ContractError {
  const waited = waitedMs === undefined ? '' : `; waited ${waitedMs} ms for it to let go`;
  return new ContractError(
    'conflict',
    `${workspace}: the owner (pid ${connection.status.pid}) serves compatibility ${servedBy(connection)}, ` +
      `this client needs ${JSON.stringify(wanted)}${waited}; stop that owner, or pass onIncompatible: 'replace'`,
  );
}

/** Whether the files no longer name the owner of `epoch` as holding the workspace. */
function stoppedSince(inspection: Inspection, epoch: string): boolean {
  if (inspection.status === 'absent' || inspection.status === 'stopped') return true;
  const owner = ownerOf(inspection);
  return owner !== undefined && owner.epoch !== epoch;
}

/** One `connectOrStart` call. */
class StartOnDemand {
  readonly #workspace: string;
  readonly #options: ConnectOrStartOptions;
  readonly #ownership: Ownership;
  readonly #reachOptions: ConnectOptions;
  readonly #claim: StartClaim;
  readonly #bound: Bound;
  #replaced = false;
  /** When this call first met a live owner of another compatibility, under `'refuse'`. */
  #incompatibleSince: number | undefined;
  /** The state this call saw while another caller's start claim kept it waiting. */
  #waitedOver: string | undefined;

  constructor(workspace: string, options: ConnectOrStartOptions) {
    const ownership = givenOwnership('connectOrStart', options?.ownership);
    this.#workspace = workspace;
    this.#options = options;
    this.#ownership = ownership;
    this.#reachOptions = {
      ownership,
      timeoutMs: options.requestTimeoutMs ?? 3000,
      ...(options.settleMs === undefined ? {} : { settleMs: options.settleMs }),
    };
    this.#claim = new StartClaim(workspace, ownership.stateHome);
    this.#bound = new Bound(workspace, options);
  }

  async run(): Promise<Connection> {
    for (;;) {
      const inspection = await this.#look();
      if (free(inspection)) {
        await this.#startOnce(inspection);
        continue;
      }
      const answer = await this.#reach();
      if (typeof answer !== 'string') {
        if (await this.#fits(answer)) return answer;
        continue;
      }
      const owner = ownerOf(inspection);
      if (owner !== undefined) this.#bound.owner(owner);
      const holder = owner === undefined ? 'the workspace' : `the owner, ${describeHolder(owner, owner.process)},`;
      await this.#bound.pause(`${holder} to answer (${described(inspection)}; ${answer})`);
    }
  }

  /**
   * Whether the live owner serves this client's compatibility. Under `'replace'`, the first owner
   * that does not is stopped (then false: look again), any after it is `conflict`; under `'refuse'`,
   * it is waited on until `waitMs` (then false: look again), and is `conflict` after.
   */
  async #fits(connection: Connection): Promise<boolean> {
    const wanted = this.#options.compatibility;
    if (wanted === undefined || connection.status.compatibility === wanted) return true;
    if (this.#options.onIncompatible !== 'replace') {
      await this.#waitToLetGo(connection, wanted);
      return false;
    }
    if (this.#replaced) throw incompatible(this.#workspace, connection, wanted);
    this.#replaced = true;
    await this.#stop(connection);
    return false;
  }

  /** One pause for an incompatible owner to let go, while `waitMs` has not passed since the first one met; then `conflict`. */
  async #waitToLetGo(connection: Connection, wanted: string): Promise<void> {
    const waitMs = this.#options.waitMs ?? 0;
    this.#incompatibleSince ??= Date.now();
    const waitedMs = Date.now() - this.#incompatibleSince;
    if (waitedMs >= waitMs) throw incompatible(this.#workspace, connection, wanted, waitMs > 0 ? waitedMs : undefined);
    // A connection is proved on this host: its owner's host is this one.
    this.#bound.owner({ epoch: connection.epoch, pid: connection.status.pid, host: currentProcess().host });
    await this.#bound.pause(
      `the owner (pid ${connection.status.pid}) of compatibility ${servedBy(connection)} to let go (waitMs ${waitMs})`,
    );
  }

  #look(): Promise<Inspection> {
    return this.#bound.abortable(settledInspection(this.#ownership, this.#workspace, this.#options.settleMs));
  }

  #reach(): Promise<Connection | string> {
    return this.#bound.abortable(reach(this.#workspace, this.#reachOptions));
  }

  /**
   * Runs `start` under the claim, then waits until the owner answers, and only then lets the claim
   * go: a caller that finds the claim gone finds the owner live. Without the claim, waits on its holder.
   */
  async #startOnce(seen: Inspection): Promise<void> {
    const attempt = this.#claim.attempt();
    if (attempt.kind === 'wait') {
      this.#waitedOver = stateKey(seen);
      if (attempt.holder === undefined) return this.#bound.pause('the start claim, which was changing');
      this.#bound.claimHolder(attempt.holder);
      return this.#bound.pause(
        `the start claim of ${describeHolder(attempt.holder, attempt.holder.verdict)}, made at ${attempt.holder.since}`,
      );
    }
    try {
      // Looked at again under the claim: whoever held it before may have brought its owner up.
      const inspection = await this.#look();
      if (!free(inspection)) return;
      // Its maker let the claim go (never a dead maker's, taken over) and left the state as it was:
      // that start ended with no owner, and this one would end the same.
      if (!attempt.tookOver && this.#waitedOver === stateKey(inspection)) {
        throw failedStart(
          this.#workspace,
          this.#ownership.stateHome,
          inspection,
          'the start another caller ran, whose claim this call waited on, ended with no owner answering',
        );
      }
      const gone = ownerOf(inspection);
      const over =
        gone === undefined
          ? ''
          : ` over the fences of an owner whose process is gone, ${describeHolder(gone, gone.process)}, which a start refuses as quarantine unless it recovers them (recoverDead),`;
      const started = await this.#bound.race(Promise.resolve().then(this.#options.start), 'start() to return');
      const launched = started === undefined ? undefined : new Launched(started);
      for (;;) {
        const answer = await this.#reach();
        if (typeof answer !== 'string') return;
        if (launched?.failed() === true) return await this.#afterExit(launched);
        await this.#bound.pause(`the owner start() began${over} to answer (${answer})`);
      }
    } finally {
      this.#claim.release(attempt.held);
    }
  }

  /** The launched process is gone: an owner it brought up before it went answers now, or the start failed. */
  async #afterExit(launched: Launched): Promise<void> {
    const inspection = await this.#look();
    if (!free(inspection) && typeof (await this.#reach()) !== 'string') return;
    throw failedStart(this.#workspace, this.#ownership.stateHome, inspection, String(launched));
  }

  /** What `leasehold stop` does: the authenticated stop, then the wait until the files no longer name that owner. */
  async #stop(connection: Connection): Promise<void> {
    const request = connection.request('POST', '/v1/stop').catch((error: unknown) => {
      if (ContractError.is(error, 'unavailable')) return undefined; // gone already: the next look tells
      throw error;
    });
    const reply = await this.#bound.abortable(request);
    if (reply?.status !== 202) return;
    for (;;) {
      const inspection = await this.#ownership.inspect(this.#workspace);
      if (stoppedSince(inspection, connection.epoch)) return;
      const owner = ownerOf(inspection);
      if (owner !== undefined) this.#bound.owner(owner);
      await this.#bound.pause(
        `the incompatible owner (pid ${connection.status.pid}) to stop (${described(inspection)})`,
      );
    }
  }
}

/**
 * Connects to the workspace's live owner, or else starts one: of any number of callers racing, in
 * any processes, one makes the workspace's start claim (an exclusive file in the state home) and
 * runs `start`; every caller then waits, bounded by `timeoutMs`, until the owner answers.
 * @throws ContractError `conflict` (the owner serves another `compatibility`, named with this
 * client's, under `'refuse'` once `waitMs` passed, or again after a replacement), `unavailable`
 * (no owner answered within `timeoutMs`: the message says what it waited for), `refused` (no
 * `ownership`, a `timeoutMs`, `waitMs` or `requestTimeoutMs` that is not a finite number of 0 or
 * more, a root or state home that is not absolute and normalised, an unsafe or malformed claim
 * file); the signal's reason once it aborts; and what `start` throws.
 */
export async function connectOrStart(workspace: string, options: ConnectOrStartOptions): Promise<Connection> {
  options?.signal?.throwIfAborted();
  for (const name of ['timeoutMs', 'waitMs', 'requestTimeoutMs'] as const) checkMs(name, options?.[name]);
  return new StartOnDemand(workspace, options).run();
}

/**
 * A bound of milliseconds, when given, is a finite number of 0 or more: `NaN` would never pass
 * and `Infinity` never ends, so the call could wait for ever.
 * @throws ContractError `refused` naming the option, before anything is done.
 */
function checkMs(name: string, value: number | undefined): void {
  if (value === undefined || (Number.isFinite(value) && value >= 0)) return;
  throw new ContractError('refused', `connectOrStart: ${name} ${value}: not a number of milliseconds`, {
    remedy: `give ${name} a finite number of milliseconds, 0 or more, or leave it out`,
  });
}
