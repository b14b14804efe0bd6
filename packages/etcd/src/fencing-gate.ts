import { dirname } from 'node:path';
import { ContractError, decodeBytes, encode } from '@leasehold/contracts';
import { PrivateFiles } from '@leasehold/private-files';
import { RECORD_BYTES, admittedTokenSchema, type AdmittedToken } from './documents.js';
import { connect, type EtcdAuth, type EtcdClient, type EtcdTls, type KeyValue } from './etcd-client.js';
import { MAX_FENCED_OPERATIONS, keyOf, operationsOf, type FencedOperation, type Sequencer } from './etcd-fence.js';

// The resource side of fencing (Chubby's sequencer check, Kleppmann's fencing token). An owner
// paused past its lease (a GC pause, a SIGSTOP, a slow disk) wakes up believing it still owns the
// root, and its next write reaches the resource after the new owner's: only the resource can tell
// the two apart, by refusing any token older than one it already admitted. The highest token is
// kept under a compare-and-swap, never read-then-write, or two writers could both pass the check.

/**
 * What the token is checked against: the same root on the same cluster (a revision of another
 * cluster or root orders nothing), at least as new as the newest admitted. Answers whether `token`
 * is newer (and must be recorded) or the one already admitted.
 */
function checkToken(admitted: AdmittedToken | undefined, token: Sequencer, where: string): 'newer' | 'same' {
  if (admitted === undefined) return 'newer';
  if (admitted.cluster !== token.cluster || admitted.root !== token.root) {
    throw new ContractError(
      'refused',
      `${where}: the token is of root ${token.root} on cluster ${token.cluster}, but this resource is fenced by root ${admitted.root} on cluster ${admitted.cluster}`,
    );
  }
  const offered = BigInt(token.revision);
  const newest = BigInt(admitted.revision);
  if (offered < newest) {
    throw new ContractError(
      'conflict',
      `${where}: stale fencing token: revision ${token.revision} is older than revision ${admitted.revision}, already admitted (a newer owner has written)`,
    );
  }
  return offered === newest ? 'same' : 'newer';
}

function recordOf(token: Sequencer): Uint8Array {
  return encode({
    schema: 'leasehold.fencing-token/1',
    root: token.root,
    cluster: token.cluster,
    revision: token.revision,
  });
}

function admittedOf(bytes: Uint8Array, where: string): AdmittedToken {
  return decodeBytes(admittedTokenSchema, bytes, RECORD_BYTES, where);
}

/** What a fencing gate on etcd connects with, and the key it keeps the newest admitted token under. */
export interface EtcdFencingGateOptions {
  /** Client URLs of the cluster's members: the cluster the tokens come from. */
  readonly endpoints: readonly string[];
  /** The resource's own key (not under a state home's prefix): the newest admitted token lives there. */
  readonly key: string;
  readonly auth?: EtcdAuth;
  readonly tls?: EtcdTls;
  /** The bound of every single etcd request (default `DEFAULT_REQUEST_TIMEOUT_MS`). */
  readonly requestTimeoutMs?: number;
}

/**
 * A resource kept in etcd, fenced by the tokens of the owners that write it: `admit(token,
 * operations)` commits the resource's writes and records the token in ONE transaction, only while
 * the token is at least as new as every one admitted before, so a check and a write can never be
 * split by a newer owner's write.
 */
export class EtcdFencingGate {
  readonly key: string;
  readonly #client: EtcdClient;

  constructor(options: EtcdFencingGateOptions) {
    this.key = options.key;
    this.#client = connect(options);
  }

  /**
   * Applies `operations` (0 to 126 writes, none to the gate's key) with the token's check, atomically.
   * @throws ContractError `conflict` for a token older than one admitted (nothing written), `refused`
   * for a token of another root or cluster or a malformed record at the key, `unavailable` when etcd
   * does not answer.
   */
  async admit(token: Sequencer, operations: readonly FencedOperation[] = []): Promise<{ readonly revision: string }> {
    if (operations.length > MAX_FENCED_OPERATIONS - 1)
      throw new ContractError(
        'refused',
        `fenced write: at most ${MAX_FENCED_OPERATIONS - 1} operations besides the token`,
      );
    if (operations.some((operation) => keyOf(operation) === this.key))
      throw new ContractError('refused', `fenced write: ${this.key} is the gate's own key`);
    const writes = operationsOf(operations);
    for (;;) {
      const { kvs } = await this.#client.range(this.key);
      const current: KeyValue | undefined = kvs[0];
      const where = `etcd:${this.key}`;
      const verdict = checkToken(current === undefined ? undefined : admittedOf(current.value, where), token, where);
      // Compare-and-swap on the key as read: a concurrent admit changes its version, and this one reads again.
      const compare =
        current === undefined ? { key: this.key, version: '0' } : { key: this.key, modRevision: current.modRevision };
      const success = verdict === 'newer' ? [{ put: this.key, value: recordOf(token) }, ...writes] : writes;
      const result = await this.#client.txn([compare], success);
      if (result.succeeded) return { revision: result.revision };
    }
  }

  /** Lets go of the connection. */
  close(): void {
    this.#client.close();
  }
}

/**
 * A local resource fenced by owners' tokens: the newest admitted token in a private file of this
 * user (`PrivateFiles` rules: a private folder, no links, durable compare-and-swap). The check and
 * the record are one compare-and-swap; the resource's own write must follow in the same serial
 * writer (one process that admits, then writes, one request at a time), or live in etcd with
 * `EtcdFencingGate`.
 */
export class FileFencingGate {
  readonly path: string;
  readonly #files: PrivateFiles;

  /** `path`: the token file; its folder must exist and be a private folder of this user. */
  constructor(path: string) {
    this.path = path;
    this.#files = new PrivateFiles(dirname(path));
  }

  /**
   * Admits a write made with `token`, recording it as the newest when it is newer.
   * @throws ContractError `conflict` for a token older than one admitted (nothing written), `refused`
   * for a token of another root or cluster, or an unsafe or malformed token file.
   */
  admit(token: Sequencer): void {
    for (;;) {
      const current = this.#files.read(this.path, RECORD_BYTES);
      if (
        checkToken(current === undefined ? undefined : admittedOf(current.bytes, this.path), token, this.path) ===
        'same'
      )
        return;
      try {
        if (current === undefined) this.#files.create(this.path, recordOf(token), RECORD_BYTES);
        else this.#files.replace(this.path, current, recordOf(token), RECORD_BYTES);
        return;
      } catch (error) {
        // Another admit won the compare-and-swap: read its token and check against it.
        if (!ContractError.is(error, 'conflict')) throw error;
      }
    }
  }
}
