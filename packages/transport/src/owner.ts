import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  ContractError,
  recoverProvedDead,
  sha256,
  type OwnerConfig,
  type Ownership,
  type OwnershipLease,
  type WaitState,
  type ProvedDeadRecovery,
  type Recovery,
} from '@leasehold/contracts';
import { resolveWorkspace } from '@leasehold/coordination';
import { errnoOf, isErrno } from '@leasehold/private-files';
import { addressOf, endpointOf } from './address.js';
import type { HandOverDecision, HandOverRequest } from './hand-over.js';
import { DEFAULT_LIMITS, ownerHandler, type OwnerRoutes, type TransportLimits } from './handler.js';
import { givenOwnership } from './ownership-option.js';

/** What a serving owner is, once it has acquired (no secret). */
export interface Serving {
  readonly root: string;
  readonly endpoint: string;
  readonly epoch: string;
  readonly pid: number;
  /** The lease, for the owner's own routes (its `owner`, `phase`). */
  readonly lease: OwnershipLease;
}

/** Why `serveOwner` ended after a clean stop and release. */
export type ServeOutcome =
  | { readonly reason: 'signal'; readonly signal: NodeJS.Signals }
  | { readonly reason: 'stop' }
  | { readonly reason: 'abort' };

export interface ServeOptions {
  /** The owner's policy document, published as `host-config.json`; the config's `policyIdentity` is its SHA-256. */
  readonly policy: Uint8Array;
  /** Where to listen: `http://127.0.0.1:PORT` or `http://[::1]:PORT`; port 0 (the default) is any free port. */
  readonly endpoint?: string;
  /**
   * Where the workspace is owned: any backend, the state home's (`openStateHome(stateHome)` of
   * @leasehold/state-home, which follows the backend it records, or `fileOwnership({ stateHome,
   * lockWaitMs, hooks })` for the file backend). Required: this package picks none.
   */
  readonly ownership: Ownership;
  /** The owner's own routes, reached only after the Host and bearer checks. */
  readonly routes?: OwnerRoutes;
  /**
   * What clients this owner serves, in the daemon's own words (a protocol version, say):
   * published in `GET /v1/status`, so that `connectOrStart` can tell an owner its client cannot use.
   */
  readonly compatibility?: string;
  /** How often the lease re-asserts its files (the self-fence), in milliseconds (default 1000). */
  readonly watchIntervalMs?: number;
  /**
   * The signals that stop the owner cleanly (default SIGINT, SIGTERM and SIGHUP: a closed
   * terminal or a dropped ssh session is a stop, never a crash that leaves fences behind).
   */
  readonly signals?: readonly NodeJS.Signals[];
  /** Stops the owner cleanly when aborted. */
  readonly signal?: AbortSignal;
  /** Bounds against hostile local clients (see `DEFAULT_LIMITS`). */
  readonly limits?: Partial<TransportLimits>;
  /**
   * An upgrade: when the workspace is stopped (no fence) and keeps another config (another
   * endpoint, or the policy of an earlier version), take this one (compare-and-swap on the
   * config read). Without it, another config is `conflict`, naming this option. Default false.
   */
  readonly replaceConfig?: boolean;
  /**
   * Opt-in recovery after a crash: when the start is refused as `quarantine` and every process the
   * workspace's fences name is proved gone on this host (pid and start time), run the ordinary
   * digest-checked recovery of `recovery` first (journalled as automatic, with that proof), then
   * acquire. A live, ambiguous or other host's holder, or a lease still running, stays `quarantine`
   * with nothing changed. Never by age. Needs `recovery`. Default false.
   */
  readonly recoverDead?: boolean;
  /**
   * The recovery of the same backend as `ownership`: `fileRecovery({ stateHome })` of
   * `@leasehold/recovery` for the files, the etcd backend itself for etcd. Only for `recoverDead`.
   */
  readonly recovery?: Recovery;
  /**
   * Called once when `recoverDead` recovered a crashed owner, before the acquire that follows: the
   * journal record, and each holder proved gone and how. So that a daemon can say what it did.
   */
  readonly onRecovered?: (recovered: ProvedDeadRecovery) => void;
  /**
   * Decides each authenticated `POST /v1/hand-over` (`askHandOver`, `leasehold stop --ask`), one at a time:
   * `{ decision: 'release' }` stops now, exactly as an authenticated stop; `{ decision: 'release-after', work }`
   * answers at once and stops once `work` settles (a stop or signal meanwhile still stops); `{ decision: 'refuse',
   * reason }` keeps serving, and the asker sees `reason` (1 to 200 printable characters). A callback that throws
   * or answers anything else refuses, saying the owner could not decide. Without it, the owner releases: it has
   * no work to finish. An accepted hand-over is shown in `GET /v1/status` until the release.
   */
  readonly onHandOverRequested?: (request: HandOverRequest) => HandOverDecision | PromiseLike<HandOverDecision>;
  /**
   * How long to wait, in milliseconds, for a live owner of the workspace to release it before this
   * one acquires (default 0: refused at once, `conflict`). Waiters are served first come, first
   * served; a quarantine is never waited for; `signal` ends the wait. The file backend only, for
   * now: the etcd backend refuses it.
   */
  readonly waitMs?: number;
  /** Told when a wait begins and about once a second while it lasts: who holds it, the waiters ahead, the time waited. */
  readonly onWait?: (wait: WaitState) => void;
  /** Called once the owner has acquired and serves. */
  readonly onServing?: (serving: Serving) => void;
  /**
   * Awaited on a clean stop after the owner went `stopping` and its listener drained, before the
   * release: the fences stay until it resolves, so what the owner started (a child process, say)
   * is gone before anyone else may acquire. When it rejects nothing is released (the workspace
   * stays fenced, `stopping`) and `serveOwner` rejects with its error.
   */
  readonly beforeRelease?: () => Promise<void>;
}

/** The signals a daemon stops on unless told otherwise. */
const DEFAULT_STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

function listen(server: Server, port: number, hostname: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', (error: Error) => {
      const code = isErrno(error, 'EADDRINUSE') ? 'conflict' : 'refused';
      reject(new ContractError(code, `${hostname}:${port}: cannot listen (${errnoOf(error) ?? 'error'})`));
    });
    server.listen(port, hostname, () => resolve((server.address() as AddressInfo).port));
  });
}

function boundedServer(limits: TransportLimits): Server {
  const server = createServer({
    maxHeaderSize: limits.headerBytes,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Node enforces the two timeouts above only when it checks its connections (every 30 s by
    // default): check often enough that a silent client is dropped about when its time is up.
    connectionsCheckingInterval: Math.max(1, Math.min(1000, limits.headersTimeoutMs)),
  });
  server.maxConnections = limits.connections;
  return server;
}

/**
 * Closes the listener. With `now`, drops every connection at once; else lets
 * requests in flight finish, for at most `drainMs`: closing a server also
 * stops Node's head and request timeouts, so a silent or half-sent
 * connection would otherwise hold the drain for ever.
 */
function closeListener(server: Server, now: boolean, drainMs: number): Promise<void> {
  return new Promise((closed) => {
    const cut = setTimeout(() => server.closeAllConnections(), now ? 0 : drainMs);
    server.close(() => {
      clearTimeout(cut);
      closed();
    });
    if (now) server.closeAllConnections();
    else server.closeIdleConnections();
  });
}

/** The recovery `recoverDead` runs, checked before anything is bound or written. */
function deadOwnerRecovery(options: ServeOptions): Recovery | undefined {
  if (options.recoverDead !== true) return undefined;
  if (options.recovery === undefined) {
    throw new ContractError(
      'refused',
      'recoverDead: pass `recovery`, the recovery of the same backend (fileRecovery({ stateHome }) of @leasehold/recovery)',
    );
  }
  return options.recovery;
}

/**
 * Acquires; with `recoverDead`, a start refused as `quarantine` first recovers an owner proved
 * dead, then acquires once more. Asked only after a refusal, so an ordinary start costs nothing more.
 */
async function acquireOrRecover(
  workspace: string,
  config: OwnerConfig,
  bound: string,
  {
    ownership,
    options,
    recovery,
    waiting,
  }: { ownership: Ownership; options: ServeOptions; recovery: Recovery | undefined; waiting: AbortSignal },
): Promise<OwnershipLease> {
  const acquire = () =>
    ownership.acquire(workspace, config, {
      boundEndpoint: bound,
      initializeNew: (fresh) => fresh.writeHostConfig(options.policy),
      ...(options.replaceConfig === undefined ? {} : { replaceConfig: options.replaceConfig }),
      ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs, signal: waiting }),
      ...(options.onWait === undefined ? {} : { onWait: options.onWait }),
    });
  try {
    return await acquire();
  } catch (error) {
    if (recovery === undefined || !ContractError.is(error, 'quarantine')) throw error;
    const recovered = await recoverProvedDead(recovery, resolveWorkspace(workspace));
    if (recovered.recovered) options.onRecovered?.(recovered);
    return acquire();
  }
}

/** Answers every request 503 until the owner has acquired: nothing is vouched for yet. */
function starting(_request: IncomingMessage, response: ServerResponse): void {
  response.writeHead(503, { 'content-type': 'application/json', 'cache-control': 'no-store', connection: 'close' });
  response.end(`${JSON.stringify({ error: 'starting' })}\n`);
}

/**
 * The owner's whole life cycle on the loopback transport: binds the listener
 * (default any free port on 127.0.0.1), acquires the workspace with the bound
 * endpoint through `options.ownership` (any backend: required, this package picks none),
 * serves `/v1/status`, `/v1/stop`, `/v1/hand-over` and the owner's routes, and watches the
 * lease. On a stop signal, an authenticated `POST /v1/stop`, an accepted hand-over or an abort, it
 * goes `stopping`, drains, awaits `beforeRelease`, releases and resolves. When the lease reports its
 * loss (with files: they changed under it) it closes the listener at once,
 * touches nothing, and rejects with the reason. A stop signal that arrives
 * during acquire is honoured after it, so acquire is never cut in half.
 * @throws ContractError `refused` (no `ownership`, a bad endpoint, an unsafe state), `conflict` (the port is taken, another owner),
 * `quarantine`, `capacity`, `busy` from acquire, and the lost lease's error.
 */
export async function serveOwner(workspace: string, options: ServeOptions): Promise<ServeOutcome> {
  const ownership = givenOwnership('serveOwner', options?.ownership);
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const recovery = deadOwnerRecovery(options);
  const requested = addressOf(options.endpoint ?? 'http://127.0.0.1:0');
  const config: OwnerConfig = {
    schema: 'leasehold.owner-config/1',
    endpoint: options.endpoint ?? 'http://127.0.0.1:0',
    policyIdentity: sha256(options.policy),
  };
  // Stop requests are recorded from the start and acted on once serving; one ends a wait for the
  // workspace at once (nothing acquired), since that wait may last long.
  let pending: ServeOutcome | undefined;
  const waiting = new AbortController();
  let stop: (outcome: ServeOutcome) => void = (outcome) => {
    pending ??= outcome;
    waiting.abort(
      new ContractError(
        'conflict',
        `${workspace}: stopped (${outcome.reason === 'signal' ? outcome.signal : outcome.reason}) while waiting for its owner; nothing was acquired`,
        // The outcome as its cause: a command tells a signal's end as an interruption (exit 128 + its number).
        {
          remedy: 'start it again when you want it: with a longer wait, or none to be told at once who holds it',
          cause: outcome,
        },
      ),
    );
  };
  const onSignal = (signal: NodeJS.Signals) => stop({ reason: 'signal', signal });
  const signals = options.signals ?? DEFAULT_STOP_SIGNALS;
  for (const signal of signals) process.on(signal, onSignal);
  const onAbort = () => stop({ reason: 'abort' });
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const server = boundedServer(limits);
  server.on('request', starting);
  try {
    const port = await listen(server, requested.port, requested.hostname);
    const bound = endpointOf(requested.hostname, port);
    const lease = await acquireOrRecover(workspace, config, bound, {
      ownership,
      options,
      recovery,
      waiting: waiting.signal,
    });
    if (options.signal?.aborted === true) onAbort();
    return await new Promise<ServeOutcome>((resolve, reject) => {
      let ending = false;
      const stopWatching = lease.watch(options.watchIntervalMs ?? 1000, (error) => {
        if (ending) return;
        ending = true;
        // Our files changed under us: stop serving at once, and touch nothing.
        void closeListener(server, true, 0).then(() => reject(error));
      });
      stop = (outcome) => {
        if (ending) return;
        ending = true;
        stopWatching();
        void (async () => {
          await lease.phase('stopping');
          await closeListener(server, false, limits.requestTimeoutMs);
          await options.beforeRelease?.();
          await lease.release();
          return outcome;
        })().then(resolve, (error: unknown) => {
          server.closeAllConnections();
          reject(error);
        });
      };
      server.off('request', starting);
      server.on(
        'request',
        ownerHandler({
          lease,
          onStop: () => stop({ reason: 'stop' }),
          limits,
          ...(options.routes === undefined ? {} : { routes: options.routes }),
          ...(options.compatibility === undefined ? {} : { compatibility: options.compatibility }),
          ...(options.onHandOverRequested === undefined ? {} : { onHandOverRequested: options.onHandOverRequested }),
        }),
      );
      options.onServing?.({ root: lease.root, endpoint: bound, epoch: lease.owner.epoch, pid: process.pid, lease });
      if (pending !== undefined) stop(pending);
    });
  } catch (error) {
    server.closeAllConnections();
    server.close();
    throw error;
  } finally {
    for (const signal of signals) process.off(signal, onSignal);
    options.signal?.removeEventListener('abort', onAbort);
  }
}
