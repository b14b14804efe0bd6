import type { Ownership, Recovery } from '@leasehold/contracts';
import type { EtcdAuth, EtcdTls } from './etcd-client.js';

/** What `etcdBackend` takes: how to reach the cluster, as which host, and this host's file backend. */
export interface EtcdBackendOptions {
  /** Client URLs of the cluster's members, such as `http://10.0.0.5:2379`. */
  readonly endpoints: readonly string[];
  /** The key prefix of one state home, such as `/leasehold/team`; prefixes of two state homes must not nest. */
  readonly prefix: string;
  /** This host's identity: endpoints are scoped by it, and records name it. */
  readonly host: string;
  /** etcd's user and password, for an etcd with authentication enabled; taken from here only, never stored. */
  readonly auth?: EtcdAuth;
  /** The CA (and this client's certificate and key) for https endpoints; taken from here only, never stored. */
  readonly tls?: EtcdTls;
  /** The bound of every single etcd request (default `DEFAULT_REQUEST_TIMEOUT_MS`). */
  readonly requestTimeoutMs?: number;
  /** The etcd lease's time to live of each acquire (default `DEFAULT_TTL_SECONDS`). */
  readonly ttlSeconds?: number;
  /** How long before the lease could expire an owner counts itself lost (default a quarter of the TTL). */
  readonly marginMs?: number;
  /**
   * This host's file backend, opened on the same state home with this backend's
   * `{ kind: 'etcd', endpoints, prefix }`: it keeps the capability, checkout lock and owner config.
   */
  readonly local: Ownership;
  /** The recovery of `local`'s files. */
  readonly localRecovery: Recovery;
}
