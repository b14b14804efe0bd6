import { createHash, timingSafeEqual } from 'node:crypto';
import { request, type IncomingMessage, type ServerResponse } from 'node:http';

/** Host and port of a loopback endpoint, and the Host header it must be reached by. */
export interface Address {
  readonly hostname: string;
  readonly port: number;
  readonly hostHeader: string;
}

/** `http://127.0.0.1:PORT` or `http://[::1]:PORT` as a socket address. */
export function addressOf(endpoint: string): Address {
  const url = new URL(endpoint);
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(url.port);
  return { hostname, port, hostHeader: `${url.hostname}:${port}` };
}

/** What the service answers about itself. */
export interface ServiceStatus {
  readonly epoch: string;
  readonly phase: string;
  readonly root: string;
  readonly pid: number;
}

export interface TransportHandlers {
  readonly hostHeader: string;
  readonly capability: string;
  status(): ServiceStatus;
  stop(): void;
}

const ROUTES: Record<string, string> = { '/v1/status': 'GET', '/v1/stop': 'POST' };

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Constant-time: both sides are hashed to one length first, so neither length nor content leaks through timing. */
function bearerMatches(header: string | undefined, capability: string): boolean {
  const token = /^Bearer ([A-Za-z0-9_-]{1,256})$/.exec(header ?? '')?.[1];
  const equal = timingSafeEqual(digest(token ?? ''), digest(capability));
  return token !== undefined && equal;
}

function answer(response: ServerResponse, status: number, body: Record<string, unknown>, headers: Record<string, string> = {}): void {
  response.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  response.end(`${JSON.stringify(body)}\n`);
}

/**
 * The service's HTTP handler. The Host check comes first: a page in a
 * browser that rebinds a name to 127.0.0.1 sends its own name as Host, and
 * must learn nothing, not even whether a token would be accepted.
 */
export function transportHandler(handlers: TransportHandlers) {
  return (incoming: IncomingMessage, response: ServerResponse): void => {
    if (incoming.headers.host !== handlers.hostHeader) return answer(response, 421, { error: 'misdirected request' });
    if (!bearerMatches(incoming.headers.authorization, handlers.capability)) {
      return answer(response, 401, { error: 'unauthorized' }, { 'www-authenticate': 'Bearer' });
    }
    const path = (incoming.url ?? '').split('?')[0] ?? '';
    const method = ROUTES[path];
    if (method === undefined) return answer(response, 404, { error: 'not found' });
    if (incoming.method !== method) return answer(response, 405, { error: 'method not allowed' }, { allow: method });
    if (path === '/v1/stop') {
      // The server is going away: a kept-alive connection would hold its drain until the keep-alive timeout.
      answer(response, 202, { ...handlers.status(), stopping: true }, { connection: 'close' });
      handlers.stop();
      return;
    }
    answer(response, 200, { ...handlers.status() });
  };
}

/** A response from the service. */
export interface Reply {
  readonly status: number;
  readonly body: unknown;
}

/**
 * Calls the service at `endpoint` with the capability; the request names the
 * bound address as Host, as the service demands.
 */
export function callService(
  endpoint: string,
  capability: string,
  method: 'GET' | 'POST',
  path: string,
  timeoutMs = 3000,
): Promise<Reply> {
  const address = addressOf(endpoint);
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        host: address.hostname,
        port: address.port,
        method,
        path,
        headers: { host: address.hostHeader, authorization: `Bearer ${capability}` },
        timeout: timeoutMs,
      },
      (incoming) => {
        const chunks: Buffer[] = [];
        incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
        incoming.on('end', () => {
          let body: unknown;
          try {
            body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            body = undefined;
          }
          resolve({ status: incoming.statusCode ?? 0, body });
        });
      },
    );
    outgoing.on('timeout', () => outgoing.destroy(new Error('the service did not answer in time')));
    outgoing.on('error', reject);
    outgoing.end();
  });
}
