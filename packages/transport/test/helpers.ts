import { readFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import { connect as connectSocket, type AddressInfo, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { sha256, type Inspection, type OwnerConfig, type Ownership } from '@leasehold/contracts';
import { fileOwnership } from '@leasehold/coordination';
import {
  bytesOf,
  caughtErrors,
  cleanUp,
  handPlaces,
  makePlace,
  makeWorkspace,
  messageOf,
  spawnPlanned,
  type SpawnedChild,
  type TestPlace,
} from '@leasehold/test-utils';
import { expect } from 'vitest';
import { serveOwner, type OwnershipLease, type ServeOptions, type ServeOutcome, type Serving } from '../src/index.js';

/** The folder of the child-process scripts; they import the built package by its name. */
export const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

/** The policy text every test owner publishes as `host-config.json`. */
const POLICY_TEXT = '{"policy":"transport tests"}';
/** Its bytes, what an owner of this process hands serveOwner as `policy`. */
export const POLICY = bytesOf(POLICY_TEXT);

/** The any-port config of an owner that publishes POLICY (what serveOwner makes too). */
const ANY_PORT: OwnerConfig = {
  schema: 'leasehold.owner-config/1',
  endpoint: 'http://127.0.0.1:0',
  policyIdentity: sha256(POLICY),
};

/** One test's place and the workspace it serves, `<base>/workspaces/owned`. */
export interface Place extends TestPlace {
  readonly root: string;
}

export function placeWithWorkspace(): Place {
  const place = makePlace('transport');
  return { ...place, root: makeWorkspace(place, 'owned') };
}

/** The file backend of a place's state home: what these tests hand every call as its `ownership`. */
export function filesOf(place: { readonly stateHome: string }): Ownership {
  return fileOwnership({ stateHome: place.stateHome });
}

/** What the place's state home tells of the workspace, read through the seam as a daemon would. */
export function inspectionOf(place: Place, root = place.root): Promise<Inspection> {
  return fileOwnership({ stateHome: place.stateHome }).inspect(root);
}

// ---------------------------------------------------------------------------------------------
// The secrets check: every capability a test met, and everything it saw, scanned after each test.

const capabilities = new Set<string>();
const seen: string[] = [];
const children: SpawnedChild[] = [];

/** The capability of the workspace's owner, read from its file by hand (and remembered for the scan). */
export function capabilityOf(place: Place, root = place.root): string {
  const { capability } = JSON.parse(readFileSync(handPlaces(place.stateHome, root).capability, 'utf8')) as {
    capability: string;
  };
  capabilities.add(capability);
  return capability;
}

/** Keeps text a test saw (a response, an error) for the scan. */
export function witness(...texts: readonly unknown[]): void {
  for (const text of texts) seen.push(typeof text === 'string' ? text : describe(text));
}

function describe(value: unknown): string {
  if (value instanceof Error) {
    return [value.name, value.message, value.stack ?? '', 'cause' in value ? describe(value.cause) : ''].join('\n');
  }
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

// What this process prints is kept too (and still printed): its console (which vitest takes over), stdout and stderr.
for (const method of ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const) {
  const print = console[method].bind(console);
  console[method] = (...args: unknown[]) => {
    seen.push(args.map((arg) => (typeof arg === 'string' ? arg : describe(arg))).join(' '));
    print(...args);
  };
}
for (const stream of [process.stdout, process.stderr]) {
  const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
  stream.write = (chunk: unknown, ...rest: unknown[]) => {
    seen.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
    return write(chunk, ...rest);
  };
}

const closers: (() => Promise<void>)[] = [];
const sockets: Socket[] = [];

/**
 * The afterEach of every file: stops what this process serves, kills and reaps the children
 * (`cleanUp`, which also removes the temp folders), then checks that no capability met in the
 * test appears in anything seen: responses, errors (the ones `codeOf` caught too), this process's
 * output, and every child's stdout and stderr.
 */
export async function endTest(): Promise<void> {
  for (const socket of sockets.splice(0)) socket.destroy();
  for (const close of closers.splice(0).reverse()) await close();
  const spawned = children.splice(0);
  const errors = caughtErrors.map(describe);
  await cleanUp();
  for (const child of spawned) {
    const end = await child.closed;
    seen.push(...child.lines, end.stderr);
  }
  const texts = [...seen.splice(0), ...errors];
  const met = [...capabilities];
  capabilities.clear();
  for (const capability of met) {
    // Shown redacted when it fails: the texts that held a capability.
    expect(
      texts.filter((text) => text.includes(capability)).map((text) => text.replaceAll(capability, '<CAPABILITY>')),
    ).toEqual([]);
  }
}

// ---------------------------------------------------------------------------------------------
// Servers of this process.

function listenOn(server: Server, port = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
}

/** A plain node:http server of this test on 127.0.0.1 (`port` 0: any), closed after the test. */
export async function plainServer(listener: RequestListener, port = 0): Promise<{ server: Server; port: number }> {
  const server = createServer(listener);
  const bound = await listenOn(server, port);
  closers.push(
    () =>
      new Promise((closed) => {
        server.close(() => closed());
        server.closeAllConnections();
      }),
  );
  return { server, port: bound };
}

/** An owner's lease acquired in this process for `port`'s endpoint, the way serveOwner acquires. */
export async function acquireFor(place: Place, port: number): Promise<OwnershipLease> {
  return fileOwnership({ stateHome: place.stateHome }).acquire(place.root, ANY_PORT, {
    boundEndpoint: `http://127.0.0.1:${port}`,
    initializeNew: (fresh) => fresh.writeHostConfig(POLICY),
  });
}

/** serveOwner in this process (no signals of its own), aborted after the test if it still runs. */
export interface InProcessOwner {
  readonly serving: Serving;
  readonly port: number;
  /** Settles when serveOwner does: its outcome, or the error it rejected with. */
  readonly ended: Promise<{ outcome?: ServeOutcome; error?: unknown }>;
  /** Whether serveOwner has settled. */
  settled(): boolean;
  /** Aborts serveOwner (its `signal` option). */
  abort(): void;
}

export async function serveHere(place: Place, options: Partial<ServeOptions> = {}): Promise<InProcessOwner> {
  const abort = new AbortController();
  let onServing: (serving: Serving) => void = () => {};
  const serving = new Promise<Serving>((resolve) => {
    onServing = resolve;
  });
  let done = false;
  const running = serveOwner(place.root, {
    ownership: filesOf(place),
    policy: POLICY,
    signals: [],
    signal: abort.signal,
    ...options,
    onServing,
  });
  const ended = running.then(
    (outcome): { outcome?: ServeOutcome; error?: unknown } => ({ outcome }),
    (error: unknown): { outcome?: ServeOutcome; error?: unknown } => ({ error }),
  );
  void ended.then((end) => {
    done = true;
    if ('error' in end) witness(end.error);
  });
  closers.push(async () => {
    abort.abort();
    await ended;
  });
  // serveOwner rejects before serving when it cannot acquire: surface that error here.
  const first = await Promise.race([serving, ended]);
  if (!('root' in first)) throw 'error' in first ? first.error : new Error('serveOwner ended before serving');
  const port = Number(new URL(first.endpoint).port);
  return { serving: first, port, ended, settled: () => done, abort: () => abort.abort() };
}

// ---------------------------------------------------------------------------------------------
// Child owners (test/fixtures/owner.mjs).

/** The plan of `fixtures/owner.mjs` (see its header). */
export interface OwnerPlan {
  readonly workspace: string;
  readonly stateHome: string;
  readonly policy: string;
  readonly endpoint?: string;
  readonly watchIntervalMs?: number;
  readonly lockWaitMs?: number;
  readonly steps?: boolean;
  readonly signalAt?: 'first';
  readonly contend?: boolean;
  readonly pauseAt?: string;
  readonly holdAfterError?: boolean;
  /** What its `onHandOverRequested` answers; absent: it passes none (the owner releases). */
  readonly handOver?: 'release' | 'release-after' | 'refuse' | 'throw';
  readonly refuseReason?: string;
}

/** What a child owner printed once it served. */
export interface ChildServing {
  readonly root: string;
  readonly endpoint: string;
  readonly epoch: string;
  readonly pid: number;
}

/** Spawns an owner child for the place's workspace; `endTest` kills it if it still runs and scans its output. */
export function spawnOwner(place: Place, plan: Partial<OwnerPlan> = {}): SpawnedChild {
  const child = spawnPlanned(FIXTURES, 'owner.mjs', {
    workspace: place.root,
    stateHome: place.stateHome,
    policy: POLICY_TEXT,
    ...plan,
  });
  children.push(child);
  return child;
}

/** The `serving` message of a child owner (waiting for it). */
export async function servingOf(child: SpawnedChild): Promise<ChildServing> {
  return (await messageOf(child, 'serving')).serving as ChildServing;
}

/** The index of the first stdout line of `child` that is a JSON object with `key`. */
export function lineIndexOf(child: SpawnedChild, key: string): number {
  return child.lines.findIndex((line) => {
    try {
      const message = JSON.parse(line) as unknown;
      return typeof message === 'object' && message !== null && key in message;
    } catch {
      return false;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP over node:net: every byte of the request is the test's.

/** A response as read off the socket. */
export interface RawReply {
  /** 0 when the connection closed without a status line. */
  readonly status: number;
  /** Header names in lower case; repeated headers joined with ', '. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** Everything received. */
  readonly text: string;
  /** The socket error, if the connection ended with one (ECONNRESET, ECONNREFUSED...). */
  readonly error?: string;
}

/** The request bytes of a request line, headers (in order, repeats allowed) and an optional body. */
export function requestBytes(requestLine: string, headers: readonly (readonly [string, string])[], body = ''): string {
  return `${requestLine}\r\n${headers.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n${body}`;
}

/** The usual request: `Host` of `port`, the bearer (when given), `Connection: close`. */
export function request(
  method: string,
  path: string,
  port: number,
  token?: string,
  extra: readonly (readonly [string, string])[] = [],
): string {
  const headers: (readonly [string, string])[] = [['Host', `127.0.0.1:${port}`]];
  if (token !== undefined) headers.push(['Authorization', `Bearer ${token}`]);
  headers.push(['Connection', 'close'], ...extra);
  return requestBytes(`${method} ${path} HTTP/1.1`, headers);
}

/** The usual request without `Connection: close` (HTTP/1.1 keeps the connection alive). */
export function keptAlive(method: string, path: string, port: number, token: string): string {
  return requestBytes(`${method} ${path} HTTP/1.1`, [
    ['Host', `127.0.0.1:${port}`],
    ['Authorization', `Bearer ${token}`],
  ]);
}

/** Resolves once `socket` has closed (at once if it has). */
export function closeOf(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    if (socket.closed) resolve();
    else socket.once('close', () => resolve());
  });
}

/** A new socket to 127.0.0.1:`port` (destroyed after the test); its errors are only recorded by `exchange`. */
export function socketTo(port: number, host = '127.0.0.1'): Socket {
  const socket = connectSocket({ host, port });
  socket.on('error', () => {});
  sockets.push(socket);
  return socket;
}

/** A connected socket to 127.0.0.1:`port` (destroyed after the test); rejects with the connection error. */
export function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = socketTo(port);
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** The error code of a connection attempt that fails (ECONNREFUSED when nothing listens), or 'connected'. */
export async function connectionResult(port: number): Promise<string> {
  try {
    const socket = await openSocket(port);
    socket.destroy();
    return 'connected';
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? 'error';
  }
}

/** The data of a chunked body (as much as came). */
function unchunked(raw: string): string {
  let body = '';
  let rest = raw;
  for (;;) {
    const lineEnd = rest.indexOf('\r\n');
    if (lineEnd < 0) return body;
    const size = parseInt(rest.slice(0, lineEnd), 16);
    if (!Number.isFinite(size) || size === 0) return body;
    body += rest.slice(lineEnd + 2, lineEnd + 2 + size);
    rest = rest.slice(lineEnd + 2 + size + 2);
  }
}

/** The reply in `received`; undefined while it is incomplete, unless the connection has `ended` (then as much as came). */
function parseReply(received: Buffer, ended: boolean, error?: string): RawReply | undefined {
  const text = received.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  const raw = text.slice(end + 4);
  const length = headers['content-length'];
  const chunked = headers['transfer-encoding'] === 'chunked';
  const body = chunked ? unchunked(raw) : raw;
  if (!ended && length !== undefined && Buffer.byteLength(raw, 'latin1') < Number(length)) return undefined;
  if (!ended && chunked && !raw.endsWith('0\r\n\r\n')) return undefined;
  if (!ended && length === undefined && !chunked) return undefined;
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
  return { status, headers, body, text, ...(error === undefined ? {} : { error }) };
}

/**
 * Sends `bytes` on a new connection to `port` (or on `socket`) and reads one response: it
 * resolves once a whole response has come (its Content-Length, or the last chunk) or the
 * connection has closed. A new connection is closed afterwards; a given socket is left open.
 */
export function exchange(target: number | Socket, bytes: string | Buffer): Promise<RawReply> {
  const socket = typeof target === 'number' ? socketTo(target) : target;
  return new Promise((resolve) => {
    let received = Buffer.alloc(0);
    let error: string | undefined;
    let done = false;
    const finish = (reply: RawReply) => {
      if (done) return;
      done = true;
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.off('error', onError);
      if (typeof target === 'number') socket.destroy();
      witness(reply.text, reply.error ?? '');
      resolve(reply);
    };
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const reply = parseReply(received, false);
      if (reply !== undefined) finish(reply);
    };
    const onClose = () => {
      const text = received.toString('latin1');
      finish(
        parseReply(received, true, error) ?? {
          status: 0,
          headers: {},
          body: '',
          text,
          ...(error === undefined ? {} : { error }),
        },
      );
    };
    const onError = (failure: NodeJS.ErrnoException) => {
      error = failure.code ?? failure.message;
    };
    socket.on('data', onData);
    socket.on('close', onClose);
    socket.on('error', onError);
    socket.write(bytes);
  });
}

/** The JSON body of a reply. */
export function jsonBody(reply: RawReply): Record<string, unknown> {
  return JSON.parse(reply.body) as Record<string, unknown>;
}
