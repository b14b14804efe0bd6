// The one module that imports `etcd3` (keep it so: nothing else of ours may): the client is
// thinly maintained, so everything Leasehold needs from etcd is named here, in etcd's own terms,
// and nothing else of the library leaks out. The rest of the package imports the client from
// here. Only its raw gRPC clients are used: keep-alives, watches and the loss decision are ours
// (see etcd-fence.ts), never the library's `lost` event. Which member a request goes to is
// members.ts, hedging is hedging.ts, a watch that follows the members is watch.ts; the words
// they all speak are etcd-client-types.ts.
import { performance } from 'node:perf_hooks';
import etcd3 from 'etcd3';
import type { ICompare, IKeyValue, IRequestOp, IResponseHeader, IWatchResponse } from 'etcd3';
import { ContractError } from '@leasehold/contracts';
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  type Compare,
  type ConnectionOptions,
  type EtcdClient,
  type EtcdTls,
  type Header,
  type KeepAliveAnswer,
  type KeyValue,
  type Operation,
  type TxnResult,
  type Watch,
  type WatchHandlers,
} from './etcd-client-types.js';
import { hedged } from './hedging.js';
import { Members, oneAtATime } from './members.js';
import { watchAcross } from './watch.js';

export {
  DEFAULT_REQUEST_TIMEOUT_MS,
  type Compare,
  type EtcdAuth,
  type EtcdClient,
  type EtcdTls,
  type KeyValue,
  type Operation,
  type Watch,
  type WatchEvent,
} from './etcd-client-types.js';

type HostPolicy = ReturnType<
  NonNullable<NonNullable<NonNullable<ConstructorParameters<typeof etcd3.Etcd3>[0]>['faultHandling']>['host']>
>;

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

/** Whether etcd never answered: no connection, a deadline passed, a stream cut (not an answer etcd gave, such as a refusal). */
function unanswered(error: unknown): boolean {
  return error instanceof Error && (error === STREAM_ENDED || etcd3.isRecoverableError(etcd3.castGrpcError(error)));
}

const STREAM_ENDED = new Error('keep-alive stream ended');

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
function credentialsOf(
  endpoints: readonly string[],
  tls: EtcdTls | undefined,
): { rootCertificate: Buffer; privateKey?: Buffer; certChain?: Buffer } | undefined {
  const secure = endpoints.filter((endpoint) => endpoint.startsWith('https://')).length;
  if (secure !== 0 && secure !== endpoints.length)
    throw new ContractError('refused', 'endpoints: all https:// or none (etcd3 cannot mix secure and plain members)');
  if (tls === undefined) return undefined;
  if (secure === 0) throw new ContractError('refused', 'endpoints: with `tls`, every endpoint is an https:// URL');
  if ((tls.cert === undefined) !== (tls.key === undefined))
    throw new ContractError('refused', 'tls: give `cert` and `key` together, or neither');
  return {
    rootCertificate: Buffer.from(tls.ca),
    ...(tls.cert === undefined || tls.key === undefined
      ? {}
      : { certChain: Buffer.from(tls.cert), privateKey: Buffer.from(tls.key) }),
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
          ...(options.auth === undefined
            ? {}
            : { auth: { username: options.auth.username, password: options.auth.password } }),
          ...(credentials === undefined ? {} : { credentials }),
          faultHandling: { host: () => PASS_THROUGH },
        }),
    ),
    unanswered,
  );
  // One deadline for every copy of a request, whichever member each goes to.
  const call = (): { deadline: number } => ({ deadline: Date.now() + requestTimeoutMs });
  const failure = (error: unknown): ContractError => failureOf(error, options.auth?.username);
  // Every error of the library turned into a ContractError.
  const guarded = <T>(sent: Promise<T>): Promise<T> => sent.catch((error: unknown) => Promise.reject(failure(error)));
  const txnOf = async (
    send: typeof oneAtATime,
    compare: readonly Compare[],
    success: readonly Operation[],
    failure: readonly Operation[],
  ): Promise<TxnResult> => {
    const request = {
      compare: compare.map(compareOf),
      success: success.map(operationOf),
      failure: failure.map(operationOf),
    };
    const options = call();
    const response = await guarded(send(members, (client) => client.kv.txn(request, options)));
    return {
      ...headerOf(response.header),
      succeeded: response.succeeded,
      ranges: response.responses
        .filter((answer) => answer.response_range !== undefined && answer.response_range !== null)
        .map((answer) => answer.response_range.kvs.map(keyValueOf)),
    };
  };
  return {
    txn: (compare, success, failure = []) => txnOf(oneAtATime, compare, success, failure),
    repeatableTxn: (compare, success, failure) => txnOf(hedged, compare, success, failure),
    async range(key, prefix) {
      const bytes = Buffer.from(key);
      const options = call();
      const response = await guarded(
        hedged(members, (client) => client.kv.range({ key: bytes, ...rangeEndOf(bytes, prefix) }, options), true),
      );
      return { header: headerOf(response.header), kvs: response.kvs.map(keyValueOf) };
    },
    async grant(ttlSeconds) {
      const options = call();
      const response = await guarded(
        oneAtATime(members, (client) => client.leaseClient.leaseGrant({ TTL: ttlSeconds }, options)),
      );
      if (response.error !== '')
        throw new ContractError('unavailable', `etcd did not grant a lease: ${response.error}`);
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
    watch: (key, startRevision, handlers, prefix) =>
      watchAcross(
        members,
        (client, from, each) => watchOn(client, failure, { key, prefix }, from, each),
        startRevision,
        handlers,
      ),
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

/** One watch stream on one member's client, in etcd's watch protocol; `watchAcross` (watch.ts) moves it between members. */
function watchOn(
  client: Etcd3Client,
  failure: (error: unknown) => ContractError,
  { key, prefix }: { readonly key: string; readonly prefix: true | undefined },
  startRevision: string,
  handlers: WatchHandlers,
): Watch {
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
          reject(
            response.canceled && response.cancel_reason !== ''
              ? failure(new Error(response.cancel_reason))
              : new ContractError('unavailable', 'the watch was cancelled'),
          );
          end(
            `the watch was ${response.compact_revision === '0' ? `cancelled (${response.cancel_reason})` : `compacted at ${response.compact_revision}`}`,
          );
          return;
        }
        if (response.events.length > 0) {
          handlers.onEvents(
            response.events.map((event) => ({
              type: event.type === 'Delete' ? 'delete' : 'put',
              kv: keyValueOf(event.kv),
            })),
          );
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
      const bytes = Buffer.from(key);
      stream.write({ create_request: { key: bytes, ...rangeEndOf(bytes, prefix), start_revision: startRevision } });
    });
  })();
  created.catch(() => {});
  return { created, cancel: () => end('cancelled by its owner') };
}

function compareOf(compare: Compare): ICompare {
  const key = Buffer.from(compare.key);
  const rangeEnd = rangeEndOf(key, 'prefix' in compare ? compare.prefix : undefined);
  if ('version' in compare) return { key, ...rangeEnd, target: 'Version', result: 'Equal', version: compare.version };
  if ('createRevision' in compare)
    return { key, ...rangeEnd, target: 'Create', result: 'Equal', create_revision: compare.createRevision };
  if ('modRevision' in compare) return { key, target: 'Mod', result: 'Equal', mod_revision: compare.modRevision };
  return { key, target: 'Lease', result: 'Equal', lease: compare.lease };
}

function operationOf(operation: Operation): IRequestOp {
  if ('put' in operation) {
    return {
      request_put: {
        key: Buffer.from(operation.put),
        value: Buffer.from(operation.value),
        ...(operation.lease === undefined ? {} : { lease: operation.lease }),
      },
    };
  }
  if ('delete' in operation) return { request_delete_range: { key: Buffer.from(operation.delete) } };
  const key = Buffer.from(operation.range);
  return {
    request_range: {
      key,
      ...rangeEndOf(key, operation.prefix),
      ...(operation.limit === undefined ? {} : { limit: operation.limit }),
    },
  };
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
  {
    said: /permission denied/,
    meaning: "etcd refused the permission (the user's roles must grant readwrite on the state home's prefix)",
  },
  {
    said: /SSL routines|certificate|self[- ]signed/i,
    meaning: 'the TLS connection to etcd failed (check `tls` and the https endpoints)',
  },
];

/** Turns what the library threw (or a watch's cancel reason) into a ContractError; the password is never in it (etcd never repeats it). */
function failureOf(error: unknown, username: string | undefined): ContractError {
  if (ContractError.is(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  const refusal = REFUSALS.find(({ said }) => said.test(message));
  if (refusal === undefined && !(error instanceof etcd3.GRPCUnauthenticatedError))
    return new ContractError('unavailable', `etcd is unavailable: ${message}`, { cause: error });
  const as = username === undefined ? '' : ` (user "${username}")`;
  return new ContractError('refused', `${refusal?.meaning ?? 'etcd refused the request'}${as}: ${message}`, {
    cause: error,
  });
}
