// The one module that imports `etcd3`: the client is thinly maintained, so everything
// Leasehold needs from etcd is named here, in etcd's own terms, and nothing else of the
// library leaks out. Only its raw gRPC clients are used: keep-alives, watches and the
// loss decision are ours (see etcd-owner-lease.ts), never the library's `lost` event.
import { performance } from 'node:perf_hooks';
import etcd3 from 'etcd3';
import type { ICompare, IKeyValue, IRequestOp, IResponseHeader, IWatchResponse } from 'etcd3';
import { ContractError } from '@leasehold/contracts';

/**
 * User and password authentication against etcd: etcd's own credential, sent to etcd only (it answers a
 * token the client sends with each request), never written to etcd, to the state home or into an error.
 */
export interface EtcdAuth {
  readonly username: string;
  readonly password: string;
}

/**
 * TLS towards etcd's https client URLs, as PEM text (the caller reads the files): `ca`, the certificate
 * authority that signed etcd's server certificates; `cert` and `key` (both or neither), this client's
 * certificate and private key, for an etcd that requires one (`--client-cert-auth`).
 */
export interface EtcdTls {
  readonly ca: string | Uint8Array;
  readonly cert?: string | Uint8Array;
  readonly key?: string | Uint8Array;
}

/** The bound of every single etcd request (a gRPC deadline) when the caller gives none, in milliseconds. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 5000;

/**
 * How long a member may leave a request unanswered before it counts as silent and a request that is
 * safe to repeat (a keep-alive, a read, a fenced write) is sent to the next member too. A healthy
 * member answers in milliseconds; 500 ms leaves room for a busy machine's stall while letting two
 * hedges fit in the shortest lease window etcd grants (its minimum TTL, 2 s, leaves 1.5 s after a
 * keep-alive's send time before the owner's default deadline).
 */
export const HEDGE_MS = 500;

/**
 * How long a silent member is left out before a keep-alive or a read is also copied to it, so that a
 * member back from a pause (or a restart) comes back into use; any answer from it does too.
 */
const PROBE_AFTER_MS = 2000;

/** What a client connects to. */
export interface ConnectionOptions {
  /** At least one member's client URL. */
  readonly endpoints: readonly string[];
  readonly auth?: EtcdAuth;
  readonly tls?: EtcdTls;
  /** The bound of every single request (gRPC deadline; default `DEFAULT_REQUEST_TIMEOUT_MS`). */
  readonly requestTimeoutMs?: number;
}

/** One key as etcd holds it. Revisions and lease ids are int64 decimal strings. */
export interface KeyValue {
  readonly key: string;
  readonly value: Uint8Array;
  readonly createRevision: string;
  readonly modRevision: string;
  readonly version: string;
  readonly lease: string;
}

/** A compare of a transaction: one key (or, with `prefix`, every key starting with it), one target, equal. */
export type Compare =
  | { readonly key: string; readonly prefix?: true; readonly version: string }
  | { readonly key: string; readonly prefix?: true; readonly createRevision: string }
  | { readonly key: string; readonly modRevision: string }
  | { readonly key: string; readonly lease: string };

/** An operation of a transaction. */
export type Operation =
  | { readonly put: string; readonly value: Uint8Array; readonly lease?: string }
  | { readonly delete: string }
  | { readonly range: string; readonly prefix?: true; readonly limit?: number };

/** Where a response came from and at which revision. */
interface Header {
  readonly cluster: string;
  readonly revision: string;
}

interface TxnResult extends Header {
  readonly succeeded: boolean;
  /** For each `range` operation of the branch that ran, in order, the keys it read. */
  readonly ranges: readonly (readonly KeyValue[])[];
}

/** One event of a watch. */
export interface WatchEvent {
  readonly type: 'put' | 'delete';
  readonly kv: KeyValue;
}

/** What a watch reports: events, or its end (cancelled, compacted, or the stream failed). */
interface WatchHandlers {
  readonly onEvents: (events: readonly WatchEvent[]) => void;
  readonly onEnd: (reason: string) => void;
}

interface Watch {
  /** Resolves once etcd confirmed the watch is in place; rejects if it never was. */
  readonly created: Promise<void>;
  cancel(): void;
}

/** A keep-alive's answer, and when the copy etcd answered was sent (`performance.now()`): etcd renewed the lease after it. */
interface KeepAliveAnswer {
  readonly ttlSeconds: number;
  readonly sentAt: number;
}

/** The smallest etcd surface Leasehold uses. */
export interface EtcdClient {
  /** A transaction sent to one member at a time, answering ones first: it is never sent twice while it may still apply. */
  txn(compare: readonly Compare[], success: readonly Operation[], failure?: readonly Operation[]): Promise<TxnResult>;
  /**
   * A transaction that is safe however many copies of it etcd applies: a read, or one whose compare
   * fails once it applied (a fenced write's). Hedged like a keep-alive: the first answer wins, and the
   * copies still outstanding may apply (and fail their compare) later.
   */
  repeatableTxn(compare: readonly Compare[], success: readonly Operation[], failure: readonly Operation[]): Promise<TxnResult>;
  /** A linearizable read, hedged. */
  range(key: string, prefix?: true): Promise<{ readonly header: Header; readonly kvs: readonly KeyValue[] }>;
  grant(ttlSeconds: number): Promise<{ readonly id: string; readonly ttlSeconds: number }>;
  /**
   * One keep-alive of lease `id`, hedged, each copy bounded by `timeoutMs` (default the request timeout):
   * the TTL etcd answered (<= 0: the lease is gone) and the monotonic time the answered copy was sent.
   */
  keepAlive(id: string, timeoutMs?: number): Promise<KeepAliveAnswer>;
  revoke(id: string): Promise<void>;
  /** Watches one key from `startRevision` on. */
  watch(key: string, startRevision: string, handlers: WatchHandlers): Watch;
  close(): void;
}

type HostPolicy = ReturnType<NonNullable<NonNullable<NonNullable<ConstructorParameters<typeof etcd3.Etcd3>[0]>['faultHandling']>['host']>>;

/**
 * The per-member policy: every request goes through. The library's default is a circuit breaker that,
 * after 3 failures, refuses every request to that member for 5 s, well after the member is back (a
 * restarted node serves again within about a second): a claimant would be told `unavailable` by the
 * breaker, not by etcd. Each request's own deadline bounds it, and an owner's safety is its local
 * deadline, so nothing is gained by blocking a member: `Members` orders them instead. The library's
 * retry of a failed connection (3 attempts within the one deadline) stays, on that one member.
 */
const PASS_THROUGH: HostPolicy = {
  _altReturn: undefined as never,
  onSuccess: () => ({ dispose: () => {} }),
  onFailure: () => ({ dispose: () => {} }),
  execute: async (request, signal = new AbortController().signal) => request({ signal }),
};

type Etcd3Client = InstanceType<typeof etcd3.Etcd3>;

/** One member, with a client of its own (so that Leasehold chooses the member of each request), and how it answers. */
interface Member {
  readonly client: Etcd3Client;
  /** `performance.now()` of its last answer. */
  answeredAt: number;
  /** Since when it has been silent (a request unanswered past `HEDGE_MS`, or no connection); undefined while it answers. */
  silentSince: number | undefined;
  /** When a copy of a request last went to it while silent, to see whether it answers again. */
  probedAt: number;
}

/** Whether etcd never answered: no connection, a deadline passed, a stream cut (not an answer etcd gave, such as a refusal). */
function unanswered(error: unknown): boolean {
  return error instanceof Error && (error === STREAM_ENDED || etcd3.isRecoverableError(etcd3.castGrpcError(error)));
}

const STREAM_ENDED = new Error('keep-alive stream ended');

/**
 * The members and their health. etcd3's own pool picks a member at random for each request and
 * never avoids one that stopped answering: a paused (SIGSTOP) member keeps its sockets open, so each
 * request sent to it waits out its whole deadline. Here a member that leaves a request unanswered
 * past `HEDGE_MS` is silent and tried last, until any answer from it (even a late one) revives it.
 */
class Members {
  readonly #members: readonly Member[];
  readonly #listeners = new Set<() => void>();

  constructor(clients: readonly Etcd3Client[]) {
    this.#members = clients.map((client) => ({ client, answeredAt: 0, silentSince: undefined, probedAt: 0 }));
  }

  /** Answering members first, the one that answered last first; then silent ones, the one silent longest last. */
  ordered(): Member[] {
    const answering = this.#members.filter((member) => member.silentSince === undefined).sort((a, b) => b.answeredAt - a.answeredAt);
    const silent = this.#members.filter((member) => member.silentSince !== undefined).sort((a, b) => (b.silentSince ?? 0) - (a.silentSince ?? 0));
    return [...answering, ...silent];
  }

  /** The silent members not tried for `PROBE_AFTER_MS`, marked tried now. */
  dueProbes(): Member[] {
    const now = performance.now();
    const due = this.#members.filter((member) => member.silentSince !== undefined && now - Math.max(member.silentSince, member.probedAt) >= PROBE_AFTER_MS);
    for (const member of due) member.probedAt = now;
    return due;
  }

  /** Runs `request` on `member`, recording whether and when it answered. */
  async run<T>(member: Member, request: (client: Etcd3Client) => Promise<T>): Promise<T> {
    const silent = (): void => {
      if (member.silentSince !== undefined) return;
      member.silentSince = performance.now();
      this.#changed();
    };
    const timer = setTimeout(silent, HEDGE_MS);
    timer.unref();
    try {
      const answer = await request(member.client);
      this.#answered(member);
      return answer;
    } catch (error) {
      if (unanswered(error)) silent();
      else this.#answered(member);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Calls `listener` each time a member turns silent or answers again; the answer unsubscribes. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  close(): void {
    for (const member of this.#members) member.client.close();
  }

  #answered(member: Member): void {
    member.answeredAt = performance.now();
    if (member.silentSince === undefined) return;
    member.silentSince = undefined;
    this.#changed();
  }

  #changed(): void {
    for (const listener of this.#listeners) listener();
  }
}

/**
 * Sends `request` to one member at a time, answering ones first, the next only once one failed
 * without an answer (no connection, the member without a leader), as etcd3's own retry did: never
 * while a copy is still under way, which could apply after a second one. All copies share one
 * deadline, so one that waited it out on a silent member leaves none for the next. A silent member
 * is tried only after every answering one.
 */
async function oneAtATime<T>(members: Members, request: (client: Etcd3Client) => Promise<T>): Promise<T> {
  let lastError: unknown;
  for (const member of members.ordered()) {
    try {
      return await members.run(member, request);
    } catch (error) {
      if (!unanswered(error)) throw error;
      lastError = error;
    }
  }
  throw lastError;
}

/**
 * Sends `request` to the first member in order and, each time `HEDGE_MS` passes (or a copy fails)
 * without an answer, to the next one too; with `probe`, also at once to each silent member due a
 * probe. The first answer wins (a refusal from etcd too); the other copies are left to finish. Only
 * for requests that are safe to apply more than once.
 */
function hedged<T>(members: Members, request: (client: Etcd3Client) => Promise<T>, probe = false): Promise<T> {
  const probes = probe ? members.dueProbes() : [];
  const order = members.ordered().filter((member) => !probes.includes(member));
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let outstanding = 0;
    let lastError: unknown;
    let timer: NodeJS.Timeout | undefined;
    const settle = (finish: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      finish();
    };
    const send = (member: Member): void => {
      outstanding += 1;
      members.run(member, request).then(
        (answer) => settle(() => resolve(answer)),
        (error: unknown) => {
          outstanding -= 1;
          if (!unanswered(error)) settle(() => reject(error));
          else if (!settled) {
            lastError = error;
            if (!sendNext() && outstanding === 0) settle(() => reject(lastError));
          }
        },
      );
    };
    const sendNext = (): boolean => {
      clearTimeout(timer);
      const member = order.shift();
      if (member === undefined) return false;
      send(member);
      timer = setTimeout(sendNext, HEDGE_MS);
      timer.unref();
      return true;
    };
    sendNext();
    for (const member of probes) send(member);
  });
}

/** The first key after every key that starts with `prefix`: etcd's range end for a prefix, in bytes. */
function prefixEnd(prefix: Buffer): Buffer {
  for (let index = prefix.length - 1; index >= 0; index--) {
    const byte = prefix[index] ?? 0xff;
    if (byte !== 0xff) return Buffer.concat([prefix.subarray(0, index), Buffer.from([byte + 1])]);
  }
  return Buffer.from([0]);
}

/** `[key, end of key's prefix)` when `prefix` is set, as etcd's `range_end`. */
function rangeEndOf(key: Buffer, prefix: boolean | undefined): { range_end?: Buffer } {
  return prefix === true ? { range_end: prefixEnd(key) } : {};
}

/**
 * The library's TLS credentials: ours when `tls` is given (then every endpoint must be https), none for
 * http endpoints, and the system's CAs for https endpoints without `tls` (the library's own default).
 */
function credentialsOf(endpoints: readonly string[], tls: EtcdTls | undefined): { rootCertificate: Buffer; privateKey?: Buffer; certChain?: Buffer } | undefined {
  const secure = endpoints.filter((endpoint) => endpoint.startsWith('https://')).length;
  if (secure !== 0 && secure !== endpoints.length) throw new ContractError('refused', 'endpoints: all https:// or none (etcd3 cannot mix secure and plain members)');
  if (tls === undefined) return undefined;
  if (secure === 0) throw new ContractError('refused', 'endpoints: with `tls`, every endpoint is an https:// URL');
  if ((tls.cert === undefined) !== (tls.key === undefined)) throw new ContractError('refused', 'tls: give `cert` and `key` together, or neither');
  return {
    rootCertificate: Buffer.from(tls.ca),
    ...(tls.cert === undefined || tls.key === undefined ? {} : { certChain: Buffer.from(tls.cert), privateKey: Buffer.from(tls.key) }),
  };
}

/**
 * Connects lazily (nothing is sent until the first request), with one etcd3 client per member so
 * that each request's member is chosen here (see `Members`); throws `refused` for TLS options that cannot work.
 */
export function connect(options: ConnectionOptions): EtcdClient {
  if (options.endpoints.length === 0) throw new ContractError('refused', 'endpoints: name at least one etcd member');
  const credentials = credentialsOf(options.endpoints, options.tls);
  const requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const members = new Members(
    options.endpoints.map(
      (endpoint) =>
        new etcd3.Etcd3({
          hosts: [endpoint],
          ...(options.auth === undefined ? {} : { auth: { username: options.auth.username, password: options.auth.password } }),
          ...(credentials === undefined ? {} : { credentials }),
          faultHandling: { host: () => PASS_THROUGH },
        }),
    ),
  );
  // One deadline for every copy of a request, whichever member each goes to.
  const call = (): { deadline: number } => ({ deadline: Date.now() + requestTimeoutMs });
  const failure = (error: unknown): ContractError => failureOf(error, options.auth?.username);
  // Every error of the library turned into a ContractError.
  const guarded = <T>(sent: Promise<T>): Promise<T> => sent.catch((error: unknown) => Promise.reject(failure(error)));
  const txnOf = async (send: typeof oneAtATime, compare: readonly Compare[], success: readonly Operation[], failure: readonly Operation[]): Promise<TxnResult> => {
    const request = { compare: compare.map(compareOf), success: success.map(operationOf), failure: failure.map(operationOf) };
    const options = call();
    const response = await guarded(send(members, (client) => client.kv.txn(request, options)));
    return {
      ...headerOf(response.header),
      succeeded: response.succeeded,
      ranges: response.responses.filter((answer) => answer.response_range !== undefined && answer.response_range !== null).map((answer) => answer.response_range.kvs.map(keyValueOf)),
    };
  };
  return {
    txn: (compare, success, failure = []) => txnOf(oneAtATime, compare, success, failure),
    repeatableTxn: (compare, success, failure) => txnOf(hedged, compare, success, failure),
    async range(key, prefix) {
      const bytes = Buffer.from(key);
      const options = call();
      const response = await guarded(hedged(members, (client) => client.kv.range({ key: bytes, ...rangeEndOf(bytes, prefix) }, options), true));
      return { header: headerOf(response.header), kvs: response.kvs.map(keyValueOf) };
    },
    async grant(ttlSeconds) {
      const options = call();
      const response = await guarded(oneAtATime(members, (client) => client.leaseClient.leaseGrant({ TTL: ttlSeconds }, options)));
      if (response.error !== '') throw new ContractError('unavailable', `etcd did not grant a lease: ${response.error}`);
      return { id: response.ID, ttlSeconds: Number(response.TTL) };
    },
    keepAlive(id, timeoutMs = requestTimeoutMs) {
      const deadline = Date.now() + timeoutMs;
      return guarded(hedged(members, (client) => keepAliveOnce(client, id, deadline), true));
    },
    async revoke(id) {
      const options = call();
      await guarded(oneAtATime(members, (client) => client.leaseClient.leaseRevoke({ ID: id }, options)));
    },
    watch: (key, startRevision, handlers) => watchAcross(members, failure, key, startRevision, handlers),
    close: () => members.close(),
  };
}

/** One keep-alive on its own stream, so that its answer is unambiguously the answer to it; `sentAt` taken before the stream opens. */
async function keepAliveOnce(client: Etcd3Client, id: string, deadline: number): Promise<KeepAliveAnswer> {
  const sentAt = performance.now();
  const stream = await client.leaseClient.leaseKeepAlive({ deadline });
  try {
    const answer = await new Promise<{ TTL: string }>((resolve, reject) => {
      stream.on('data', resolve);
      stream.on('error', reject);
      stream.on('end', () => reject(STREAM_ENDED));
      stream.write({ ID: id });
    });
    return { ttlSeconds: Number(answer.TTL), sentAt };
  } finally {
    stream.end();
  }
}

/**
 * A watch on the member that answered last, moved when that member turns silent: a new stream on an
 * answering member from the revision after the last event delivered (so no event is missed, and none
 * is delivered twice), the old one cancelled once the new one is in place. A move that fails leaves
 * the watch where it is: a silent member only delays an early warning (the fenced compare and the
 * local deadline are the safety), and must not cost a lease. A stream that ends still ends the watch.
 */
function watchAcross(members: Members, failure: (error: unknown) => ContractError, key: string, startRevision: string, handlers: WatchHandlers): Watch {
  let delivered = BigInt(startRevision) - 1n;
  let ended = false;
  const open = (member: Member): Watch => {
    const watch: Watch = watchOn(member.client, failure, key, (delivered + 1n).toString(), {
      onEvents: (events) => {
        const fresh = events.filter((event) => BigInt(event.kv.modRevision) > delivered);
        const last = fresh.at(-1);
        if (last === undefined) return;
        delivered = BigInt(last.kv.modRevision);
        handlers.onEvents(fresh);
      },
      // Only the stream in use ends the watch: a replaced one, or a move that failed, does not.
      onEnd: (reason) => {
        if (watch !== current.watch || ended) return;
        ended = true;
        stopListening();
        handlers.onEnd(reason);
      },
    });
    return watch;
  };
  const first = members.ordered()[0];
  if (first === undefined) throw new ContractError('refused', 'endpoints: name at least one etcd member');
  let current = { member: first, watch: open(first) };
  let moving: Watch | undefined;
  const move = async (): Promise<void> => {
    const target = members.ordered()[0];
    if (ended || moving !== undefined || current.member.silentSince === undefined || target === undefined || target === current.member || target.silentSince !== undefined) return;
    moving = open(target);
    const created = await moving.created.then(() => true, () => false);
    const next = moving;
    moving = undefined;
    if (!created || ended) return;
    const old = current.watch;
    current = { member: target, watch: next };
    old.cancel();
  };
  const stopListening = members.onChange(() => void move());
  return {
    created: current.watch.created,
    cancel: () => {
      moving?.cancel();
      current.watch.cancel();
    },
  };
}

function watchOn(client: Etcd3Client, failure: (error: unknown) => ContractError, key: string, startRevision: string, handlers: WatchHandlers): Watch {
  let ended = false;
  let cancelStream: (() => void) | undefined;
  const end = (reason: string): void => {
    if (ended) return;
    ended = true;
    cancelStream?.();
    handlers.onEnd(reason);
  };
  const created = (async () => {
    const stream = await client.watchClient.watch().catch((error: unknown) => Promise.reject(failure(error)));
    cancelStream = () => stream.cancel();
    if (ended) stream.cancel();
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (response: IWatchResponse) => {
        if (response.created) resolve();
        if (response.canceled || response.compact_revision !== '0') {
          // A watch etcd refused at its creation (no permission on the key) says why in its cancel reason.
          reject(response.canceled && response.cancel_reason !== '' ? failure(new Error(response.cancel_reason)) : new ContractError('unavailable', 'the watch was cancelled'));
          end(`the watch was ${response.compact_revision === '0' ? `cancelled (${response.cancel_reason})` : `compacted at ${response.compact_revision}`}`);
          return;
        }
        if (response.events.length > 0) {
          handlers.onEvents(response.events.map((event) => ({ type: event.type === 'Delete' ? 'delete' : 'put', kv: keyValueOf(event.kv) })));
        }
      });
      stream.on('error', (error: Error) => {
        reject(failure(error));
        end(`the watch stream failed: ${error.message}`);
      });
      stream.on('end', () => {
        reject(new ContractError('unavailable', 'the watch stream ended'));
        end('the watch stream ended');
      });
      stream.write({ create_request: { key: Buffer.from(key), start_revision: startRevision } });
    });
  })();
  created.catch(() => {});
  return { created, cancel: () => end('cancelled by its owner') };
}

function compareOf(compare: Compare): ICompare {
  const key = Buffer.from(compare.key);
  const rangeEnd = rangeEndOf(key, 'prefix' in compare ? compare.prefix : undefined);
  if ('version' in compare) return { key, ...rangeEnd, target: 'Version', result: 'Equal', version: compare.version };
  if ('createRevision' in compare) return { key, ...rangeEnd, target: 'Create', result: 'Equal', create_revision: compare.createRevision };
  if ('modRevision' in compare) return { key, target: 'Mod', result: 'Equal', mod_revision: compare.modRevision };
  return { key, target: 'Lease', result: 'Equal', lease: compare.lease };
}

function operationOf(operation: Operation): IRequestOp {
  if ('put' in operation) {
    return { request_put: { key: Buffer.from(operation.put), value: Buffer.from(operation.value), ...(operation.lease === undefined ? {} : { lease: operation.lease }) } };
  }
  if ('delete' in operation) return { request_delete_range: { key: Buffer.from(operation.delete) } };
  const key = Buffer.from(operation.range);
  return { request_range: { key, ...rangeEndOf(key, operation.prefix), ...(operation.limit === undefined ? {} : { limit: operation.limit }) } };
}

function keyValueOf(kv: IKeyValue): KeyValue {
  return {
    key: kv.key.toString(),
    value: new Uint8Array(kv.value),
    createRevision: kv.create_revision,
    modRevision: kv.mod_revision,
    version: kv.version,
    lease: kv.lease,
  };
}

function headerOf(header: IResponseHeader): Header {
  return { cluster: header.cluster_id, revision: header.revision };
}

/**
 * What etcd (or its TLS handshake) says when it will not serve these credentials, this user or this
 * certificate: retrying cannot help, so it is `refused`, with what etcd said. Anything else is `unavailable`.
 * (An expired token is not among them: the library fetches a new one on the next request.)
 */
const REFUSALS: readonly { readonly said: RegExp; readonly meaning: string }[] = [
  { said: /authentication failed, invalid user ID or password/, meaning: 'etcd refused the credentials' },
  { said: /user name is empty/, meaning: 'etcd has authentication enabled and was given no credentials (pass `auth`)' },
  { said: /permission denied/, meaning: "etcd refused the permission (the user's roles must grant readwrite on the state home's prefix)" },
  { said: /SSL routines|certificate|self[- ]signed/i, meaning: 'the TLS connection to etcd failed (check `tls` and the https endpoints)' },
];

/** Turns what the library threw (or a watch's cancel reason) into a ContractError; the password is never in it (etcd never repeats it). */
function failureOf(error: unknown, username: string | undefined): ContractError {
  if (ContractError.is(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  const refusal = REFUSALS.find(({ said }) => said.test(message));
  if (refusal === undefined && !(error instanceof etcd3.GRPCUnauthenticatedError)) return new ContractError('unavailable', `etcd is unavailable: ${message}`, { cause: error });
  const as = username === undefined ? '' : ` (user "${username}")`;
  return new ContractError('refused', `${refusal?.meaning ?? 'etcd refused the request'}${as}: ${message}`, { cause: error });
}
