// The one module that imports `etcd3`: the client is thinly maintained, so everything
// Leasehold needs from etcd is named here, in etcd's own terms, and nothing else of the
// library leaks out. Only its raw gRPC clients are used: keep-alives, watches and the
// loss decision are ours (see owner-lease.ts), never the library's `lost` event.
import etcd3 from 'etcd3';
import type { ICompare, IKeyValue, IRequestOp, IResponseHeader, IWatchResponse } from 'etcd3';
import { ContractError } from '@leasehold/contracts';

/** User and password authentication against etcd (its own credential, never a Leasehold secret). */
export interface EtcdAuth {
  readonly username: string;
  readonly password: string;
}

/** What a client connects to. */
export interface ConnectionOptions {
  readonly endpoints: readonly string[];
  readonly auth?: EtcdAuth;
  /** The bound of every single request (gRPC deadline). */
  readonly requestTimeoutMs: number;
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

/** The smallest etcd surface Leasehold uses. */
export interface EtcdClient {
  txn(compare: readonly Compare[], success: readonly Operation[], failure?: readonly Operation[]): Promise<TxnResult>;
  range(key: string, prefix?: true): Promise<{ readonly header: Header; readonly kvs: readonly KeyValue[] }>;
  grant(ttlSeconds: number): Promise<{ readonly id: string; readonly ttlSeconds: number }>;
  /** One keep-alive of lease `id`: the TTL etcd answered (<= 0: the lease is gone). */
  keepAlive(id: string): Promise<number>;
  revoke(id: string): Promise<void>;
  /** Watches one key from `startRevision` on. */
  watch(key: string, startRevision: string, handlers: WatchHandlers): Watch;
  close(): void;
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

export function connect(options: ConnectionOptions): EtcdClient {
  const client = new etcd3.Etcd3({
    hosts: [...options.endpoints],
    ...(options.auth === undefined ? {} : { auth: { username: options.auth.username, password: options.auth.password } }),
  });
  const call = (): { deadline: number } => ({ deadline: Date.now() + options.requestTimeoutMs });
  return {
    async txn(compare, success, failure = []) {
      const response = await guarded(() =>
        client.kv.txn({ compare: compare.map(compareOf), success: success.map(operationOf), failure: failure.map(operationOf) }, call()),
      );
      return {
        ...headerOf(response.header),
        succeeded: response.succeeded,
        ranges: response.responses.filter((answer) => answer.response_range !== undefined && answer.response_range !== null).map((answer) => answer.response_range.kvs.map(keyValueOf)),
      };
    },
    async range(key, prefix) {
      const bytes = Buffer.from(key);
      const response = await guarded(() => client.kv.range({ key: bytes, ...rangeEndOf(bytes, prefix) }, call()));
      return { header: headerOf(response.header), kvs: response.kvs.map(keyValueOf) };
    },
    async grant(ttlSeconds) {
      const response = await guarded(() => client.leaseClient.leaseGrant({ TTL: ttlSeconds }, call()));
      if (response.error !== '') throw new ContractError('unavailable', `etcd did not grant a lease: ${response.error}`);
      return { id: response.ID, ttlSeconds: Number(response.TTL) };
    },
    keepAlive: (id) => guarded(() => keepAliveOnce(client, id, options.requestTimeoutMs)),
    async revoke(id) {
      await guarded(() => client.leaseClient.leaseRevoke({ ID: id }, call()));
    },
    watch: (key, startRevision, handlers) => watchKey(client, key, startRevision, handlers),
    close: () => client.close(),
  };
}

/** One keep-alive on its own stream, so that its answer is unambiguously the answer to it. */
async function keepAliveOnce(client: InstanceType<typeof etcd3.Etcd3>, id: string, timeoutMs: number): Promise<number> {
  const stream = await client.leaseClient.leaseKeepAlive({ deadline: Date.now() + timeoutMs });
  try {
    const answer = await new Promise<{ TTL: string }>((resolve, reject) => {
      stream.on('data', resolve);
      stream.on('error', reject);
      stream.on('end', () => reject(new Error('keep-alive stream ended')));
      stream.write({ ID: id });
    });
    return Number(answer.TTL);
  } finally {
    stream.end();
  }
}

function watchKey(client: InstanceType<typeof etcd3.Etcd3>, key: string, startRevision: string, handlers: WatchHandlers): Watch {
  let ended = false;
  let cancelStream: (() => void) | undefined;
  const end = (reason: string): void => {
    if (ended) return;
    ended = true;
    cancelStream?.();
    handlers.onEnd(reason);
  };
  const created = (async () => {
    const stream = await guarded(() => client.watchClient.watch());
    cancelStream = () => stream.cancel();
    if (ended) stream.cancel();
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (response: IWatchResponse) => {
        if (response.created) resolve();
        if (response.canceled || response.compact_revision !== '0') {
          reject(new ContractError('unavailable', 'the watch was cancelled'));
          end(`the watch was ${response.compact_revision === '0' ? `cancelled (${response.cancel_reason})` : `compacted at ${response.compact_revision}`}`);
          return;
        }
        if (response.events.length > 0) {
          handlers.onEvents(response.events.map((event) => ({ type: event.type === 'Delete' ? 'delete' : 'put', kv: keyValueOf(event.kv) })));
        }
      });
      stream.on('error', (error: Error) => {
        reject(unavailable(error));
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

/** Runs one request, turning the library's errors into ContractErrors: a refused credential or permission is `refused`, anything else `unavailable`. */
async function guarded<T>(request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    if (ContractError.is(error)) throw error;
    throw unavailable(error);
  }
}

function unavailable(error: unknown): ContractError {
  const denied =
    error instanceof etcd3.EtcdPermissionDeniedError ||
    error instanceof etcd3.EtcdAuthenticationFailedError ||
    error instanceof etcd3.EtcdInvalidAuthTokenError ||
    error instanceof etcd3.GRPCUnauthenticatedError;
  const message = error instanceof Error ? error.message : String(error);
  return new ContractError(denied ? 'refused' : 'unavailable', `etcd ${denied ? 'refused the request' : 'is unavailable'}: ${message}`, { cause: error });
}
