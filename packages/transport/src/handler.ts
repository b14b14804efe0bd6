import type { IncomingMessage, ServerResponse } from 'node:http';
import { ContractError, type OwnershipLease } from '@leasehold/contracts';
import { addressOf } from './address.js';
import { bearerCheck } from './bearer.js';
import {
  handOverDesk,
  handOverRequestOf,
  type HandOverDecision,
  type HandOverPending,
  type HandOverRequest,
} from './hand-over.js';

/** What `GET /v1/status` answers: who serves, never the capability. */
export interface OwnerStatusBody {
  readonly epoch: string;
  readonly phase: string;
  readonly root: string;
  readonly pid: number;
  /** The owner's `compatibility` (see `ServeOptions`); absent when it published none. */
  readonly compatibility?: string;
  /** A hand-over the owner accepted and has not yet released (`POST /v1/hand-over`); absent otherwise. */
  readonly handOver?: HandOverPending;
}

/** The owner's own routes, reached only after the Host and bearer checks. */
export type OwnerRoutes = (request: IncomingMessage, response: ServerResponse) => void | Promise<void>;

/** Bounds against hostile local clients. */
export interface TransportLimits {
  /** Largest request head in bytes (Node's `maxHeaderSize`). */
  readonly headerBytes: number;
  /** Largest request body an owner's route may read with `readBody`, and the most any `Content-Length` may say. */
  readonly bodyBytes: number;
  /** How long a client may take to send its whole head. */
  readonly headersTimeoutMs: number;
  /** How long a client may take to send its whole request. */
  readonly requestTimeoutMs: number;
  /** How long an idle kept-alive connection stays open. */
  readonly keepAliveTimeoutMs: number;
  /** Most connections open at once; more are refused by the listener. */
  readonly connections: number;
}

/** The defaults of every bound. */
export const DEFAULT_LIMITS: TransportLimits = {
  headerBytes: 8192,
  bodyBytes: 65536,
  headersTimeoutMs: 5000,
  requestTimeoutMs: 10000,
  keepAliveTimeoutMs: 1000,
  connections: 256,
};

export interface OwnerHandlerOptions {
  /** The lease the handler answers for (any backend's); its capability is read once, when the handler is made. */
  readonly lease: OwnershipLease;
  /**
   * Called once per authenticated `POST /v1/stop`, after the 202 is written; and for a hand-over the owner
   * accepted, after its 202, at once (`release`) or once its work settled (`release-after`). It may be called
   * again after a stop began: make a second call do nothing.
   */
  readonly onStop: () => void;
  /**
   * Decides each authenticated `POST /v1/hand-over`, one at a time (see `ServeOptions.onHandOverRequested`).
   * Without it, the owner releases: it has no work to finish.
   */
  readonly onHandOverRequested?: (request: HandOverRequest) => HandOverDecision | PromiseLike<HandOverDecision>;
  /** The owner's own routes; without them every other path is 404. */
  readonly routes?: OwnerRoutes;
  /** Only `bodyBytes` is used here (default 65536). */
  readonly limits?: Partial<TransportLimits>;
  /** Published in the status body as `compatibility`; absent when not given. */
  readonly compatibility?: string;
}

const CONTRACT_ROUTES: Readonly<Record<string, string>> = {
  '/v1/status': 'GET',
  '/v1/stop': 'POST',
  '/v1/hand-over': 'POST',
};

function answer(
  response: ServerResponse,
  status: number,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  response.end(`${JSON.stringify(body)}\n`);
}

/** 503: the ownership changed under the owner, which must not vouch for an epoch (nor act on it) it may have lost. */
function lost(response: ServerResponse, error: unknown): void {
  answer(response, 503, { error: `the lease is lost (${ContractError.is(error) ? error.code : 'error'})` });
}

/** How many times a header appears in the raw request (Node keeps only the first `Host`). */
function occurrences(request: IncomingMessage, name: string): number {
  let count = 0;
  for (let index = 0; index < request.rawHeaders.length; index += 2) {
    if (request.rawHeaders[index]!.toLowerCase() === name) count += 1;
  }
  return count;
}

/**
 * The request handler of an owner (`node:http`), usable on the owner's own
 * server beside its own routes. In this order: a request with two `Host` or
 * two `Authorization` headers is 400 (RFC 9112: answering the first would let
 * two parsers disagree); the `Host` must be exactly the bound `host:port` and
 * the target a path (else 421: a web page that rebinds its own name to
 * 127.0.0.1 learns nothing, not even whether a token would do); then the
 * bearer capability (else 401 with `WWW-Authenticate: Bearer`); then
 * `GET /v1/status`, `POST /v1/stop` and `POST /v1/hand-over`; every other path goes to `routes`.
 * @throws ContractError as the lease's `localAccess` (the lease is not held).
 */
export function ownerHandler(
  options: OwnerHandlerOptions,
): (request: IncomingMessage, response: ServerResponse) => void {
  const { lease, onStop, routes, compatibility } = options;
  const access = lease.localAccess();
  const hostHeader = addressOf(access.endpoint).hostHeader;
  const authorised = bearerCheck(access.capability);
  const bodyBytes = options.limits?.bodyBytes ?? DEFAULT_LIMITS.bodyBytes;
  const desk = handOverDesk(options.onHandOverRequested, onStop);
  const status = (): OwnerStatusBody => {
    const handOver = desk.pending();
    return {
      epoch: access.epoch,
      phase: lease.owner.phase,
      root: lease.root,
      pid: process.pid,
      ...(compatibility === undefined ? {} : { compatibility }),
      ...(handOver === undefined ? {} : { handOver }),
    };
  };
  /** Reads and checks the body (400, nothing changed, when it is not a request), then asks the desk. */
  const handOverRoute = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    let bytes: Uint8Array;
    try {
      bytes = await readBody(request, bodyBytes);
    } catch {
      return void response.destroy(); // over the bound (readBody closed it), or the client went away
    }
    const read = handOverRequestOf(bytes);
    if ('problem' in read) return answer(response, 400, { error: `bad request: ${read.problem}` });
    try {
      await lease.assert();
    } catch (error) {
      return lost(response, error);
    }
    const decided = await desk.ask(read.request);
    if (decided.decision === 'refuse') return answer(response, 409, { error: 'conflict', reason: decided.reason });
    // Released now, the server is going away: a kept-alive connection would hold its drain (as for a stop).
    answer(
      response,
      202,
      { decision: decided.decision },
      decided.decision === 'release' ? { connection: 'close' } : {},
    );
    decided.afterAnswer?.();
  };
  return (request, response) => {
    if (occurrences(request, 'host') !== 1 || occurrences(request, 'authorization') > 1) {
      return answer(
        response,
        400,
        { error: 'bad request: one Host and at most one Authorization header' },
        { connection: 'close' },
      );
    }
    if (request.headers.host !== hostHeader || !(request.url ?? '').startsWith('/')) {
      return answer(response, 421, { error: 'misdirected request' }, { connection: 'close' });
    }
    if (!authorised(request.headers.authorization)) {
      return answer(response, 401, { error: 'unauthorized' }, { 'www-authenticate': 'Bearer' });
    }
    if (Number(request.headers['content-length'] ?? 0) > bodyBytes) {
      return answer(response, 413, { error: `request body over ${bodyBytes} bytes` }, { connection: 'close' });
    }
    const path = (request.url ?? '').split('?')[0] ?? '';
    const method = CONTRACT_ROUTES[path];
    if (method === undefined) {
      if (routes === undefined) return answer(response, 404, { error: 'not found' });
      void Promise.resolve()
        .then(() => routes(request, response))
        .catch(() => {
          if (!response.headersSent) answer(response, 500, { error: 'the owner route failed' });
          else response.destroy();
        });
      return;
    }
    if (request.method !== method) return answer(response, 405, { error: 'method not allowed' }, { allow: method });
    if (path === '/v1/hand-over') {
      void handOverRoute(request, response);
      return;
    }
    void lease.assert().then(
      () => {
        if (path === '/v1/stop') {
          // The server is going away: a kept-alive connection would hold its drain until the keep-alive timeout.
          answer(response, 202, { ...status(), stopping: true }, { connection: 'close' });
          onStop();
          return;
        }
        answer(response, 200, { ...status() });
      },
      (error: unknown) => lost(response, error),
    );
  };
}

/**
 * The body of a request to an owner's route, at most `maxBytes`.
 * @throws ContractError `capacity` over the bound (the connection is then closed).
 */
export function readBody(request: IncomingMessage, maxBytes: number = DEFAULT_LIMITS.bodyBytes): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > maxBytes) {
        request.destroy();
        reject(new ContractError('capacity', `request body over ${maxBytes} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => resolve(new Uint8Array(Buffer.concat(chunks))));
    request.on('error', reject);
  });
}
