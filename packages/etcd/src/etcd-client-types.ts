// The words of Leasehold's etcd client: what it connects with, what a request carries and
// what it answers, in etcd's own terms. They are kept apart from the seam (etcd-client.ts,
// which re-exports them) so that the member routing, hedging and watch modules can speak
// them without the `etcd3` library.

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
export interface Header {
  readonly cluster: string;
  readonly revision: string;
}

export interface TxnResult extends Header {
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
export interface WatchHandlers {
  readonly onEvents: (events: readonly WatchEvent[]) => void;
  readonly onEnd: (reason: string) => void;
}

export interface Watch {
  /** Resolves once etcd confirmed the watch is in place; rejects if it never was. */
  readonly created: Promise<void>;
  cancel(): void;
}

/** A keep-alive's answer, and when the copy etcd answered was sent (`performance.now()`): etcd renewed the lease after it. */
export interface KeepAliveAnswer {
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
  repeatableTxn(
    compare: readonly Compare[],
    success: readonly Operation[],
    failure: readonly Operation[],
  ): Promise<TxnResult>;
  /** A linearizable read, hedged. */
  range(key: string, prefix?: true): Promise<{ readonly header: Header; readonly kvs: readonly KeyValue[] }>;
  grant(ttlSeconds: number): Promise<{ readonly id: string; readonly ttlSeconds: number }>;
  /**
   * One keep-alive of lease `id`, hedged, each copy bounded by `timeoutMs` (default the request timeout):
   * the TTL etcd answered (<= 0: the lease is gone) and the monotonic time the answered copy was sent.
   */
  keepAlive(id: string, timeoutMs?: number): Promise<KeepAliveAnswer>;
  revoke(id: string): Promise<void>;
  /** Watches one key (or, with `prefix`, every key starting with it) from `startRevision` on. */
  watch(key: string, startRevision: string, handlers: WatchHandlers, prefix?: true): Watch;
  close(): void;
}
