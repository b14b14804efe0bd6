import type { Readable } from 'node:stream';
import { ContractError, type Inspection, type LocalAccess, type Ownership } from '@leasehold/contracts';
import { errnoOf } from '@leasehold/private-files';
import { addressOf } from './address.js';
import type { OwnerStatusBody } from './handler.js';
import { givenOwnership } from './ownership-option.js';

/** One answer of the owner, its body read whole. */
export interface Reply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  readonly body: unknown;
  /** The body as it came: for a route that answers text, bytes, or JSON you decode yourself. */
  readonly bytes: Uint8Array;
  /** The body decoded as UTF-8. */
  readonly text: string;
}

/** One answer of the owner whose body is not read yet: consume `body` (or destroy it) as it comes. */
export interface StreamReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Readable;
}

/** A proven owner: it answered with the epoch its files record. */
export interface Connection {
  readonly endpoint: string;
  readonly epoch: string;
  /** The owner's status as it answered the challenge. */
  readonly status: OwnerStatusBody;
  /**
   * An authenticated call (the right `Host`, the bearer capability).
   * @throws ContractError `unavailable` when the owner does not answer in time.
   */
  request(method: string, path: string, body?: unknown): Promise<Reply>;
  /**
   * The same call, answered as soon as the owner's status line and headers arrive, its body a
   * stream (an owner's route that streams logs or events). `timeoutMs` bounds the wait for the
   * headers; the body may last as long as the owner sends it.
   * @throws ContractError `unavailable` when the owner does not answer in time.
   */
  stream(method: string, path: string, body?: unknown): Promise<StreamReply>;
}

export interface ConnectOptions {
  /**
   * Where the workspace is owned: any backend, the state home's (`openStateHome(stateHome)` of
   * @leasehold/state-home, or `fileOwnership({ stateHome })`). Required: this package picks none.
   */
  readonly ownership: Ownership;
  /** How long one request may take, in milliseconds (default 3000). */
  readonly timeoutMs?: number;
  /**
   * How long to ask again while the files show a live process between two
   * steps of its acquire or release of this workspace (default 1000 ms).
   */
  readonly settleMs?: number;
}

const pause = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/** A call to `endpoint` with the capability, answered once its headers arrive; never prints or returns it. */
function callStreaming(
  endpoint: string,
  capability: string,
  timeoutMs: number,
  method: string,
  path: string,
  body?: unknown,
): Promise<StreamReply> {
  const address = addressOf(endpoint);
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  // node:http is loaded by the first call, not at import: a program that loads this module and
  // calls no owner (`leasehold status` of a stopped workspace) never pays for it (about 2 ms).
  const { request: httpRequest } = process.getBuiltinModule('node:http');
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      {
        host: address.hostname,
        port: address.port,
        method,
        path,
        headers: {
          host: address.hostHeader,
          authorization: `Bearer ${capability}`,
          ...(payload === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': String(payload.byteLength) }),
        },
        timeout: timeoutMs,
      },
      (incoming) => {
        // The bound was for the answer to begin; a streamed body may take as long as the owner sends it.
        outgoing.setTimeout(0);
        resolve({ status: incoming.statusCode ?? 0, headers: incoming.headers, body: incoming });
      },
    );
    outgoing.on('timeout', () => outgoing.destroy(new Error('no answer in time')));
    outgoing.on('error', (error: Error) => reject(noAnswer(endpoint, error)));
    outgoing.end(payload);
  });
}

/** The same call, its body read whole (within the same bound) and decoded every way a caller may want it. */
async function call(
  endpoint: string,
  capability: string,
  timeoutMs: number,
  method: string,
  path: string,
  body?: unknown,
): Promise<Reply> {
  const deadline = Date.now() + timeoutMs;
  const { status, headers, body: stream } = await callStreaming(endpoint, capability, timeoutMs, method, path, body);
  const bytes = await readWhole(stream, Math.max(0, deadline - Date.now()), endpoint);
  const text = Buffer.from(bytes).toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status, headers, body: parsed, bytes, text };
}

/** `unavailable`: no answer from `endpoint`, with the errno (else the message) of the error that ended the wait. */
function noAnswer(endpoint: string, error: Error): ContractError {
  return new ContractError('unavailable', `${endpoint}: no answer (${errnoOf(error) ?? error.message})`);
}

/** Every byte of `stream`, or `unavailable` when it does not end within `timeoutMs`. */
function readWhole(stream: Readable, timeoutMs: number, endpoint: string): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => stream.destroy(new Error('no answer in time')), timeoutMs);
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => {
      clearTimeout(timer);
      resolve(new Uint8Array(Buffer.concat(chunks)));
    });
    stream.on('error', (error: Error) => {
      clearTimeout(timer);
      reject(noAnswer(endpoint, error));
    });
  });
}

/**
 * `ownership.inspect(root)`, asked again (for at most `settleMs`, default 1000) while it says a live
 * process is between two steps of this workspace's acquire or release: what a status reader answers.
 * Never throws, as `inspect`, but for a missing `ownership` (`refused`, naming it).
 */
export async function settledInspection(ownership: Ownership, root: string, settleMs = 1000): Promise<Inspection> {
  const given = givenOwnership('settledInspection', ownership);
  const deadline = Date.now() + settleMs;
  for (;;) {
    const inspection = await given.inspect(root);
    const passing = inspection.status === 'unavailable' && inspection.inProgress === true;
    if (!passing || Date.now() >= deadline) return inspection;
    await pause(10);
  }
}

/**
 * The owner's access material. Its read already proves the files name one whole ownership (the
 * row is the registration, the capability is there), so a running owner costs that one read.
 * Only when there is none is the workspace inspected, waiting out an acquire or release in
 * progress, to say why (not running) or to read it again once it settled.
 */
async function accessOf(ownership: Ownership, workspace: string, settleMs: number | undefined): Promise<LocalAccess> {
  try {
    return await ownership.localAccess(workspace);
  } catch (error) {
    if (!ContractError.is(error, 'unavailable')) throw error;
  }
  const inspection = await settledInspection(ownership, workspace, settleMs);
  if (inspection.status === 'absent' || inspection.status === 'stopped') {
    throw new ContractError('unavailable', `${workspace}: not running (${inspection.status})`);
  }
  return ownership.localAccess(workspace);
}

/**
 * Proves the workspace's owner live: reads its access material, challenges
 * it (`GET /v1/status` with the right `Host` and bearer) and resolves only
 * when it answers with the recorded epoch.
 * @throws ContractError `unavailable` with the reason: not running, no answer, another epoch answered,
 * the capability refused; `refused` without `options.ownership`.
 */
export async function connect(workspace: string, options: ConnectOptions): Promise<Connection> {
  const ownership = givenOwnership('connect', options?.ownership);
  const timeoutMs = options.timeoutMs ?? 3000;
  const access = await accessOf(ownership, workspace, options.settleMs);
  const reply = await call(access.endpoint, access.capability, timeoutMs, 'GET', '/v1/status');
  const status = reply.body as Partial<OwnerStatusBody> | undefined;
  if (reply.status !== 200) {
    throw new ContractError('unavailable', `${access.endpoint}: the owner answered ${reply.status}, not its status`);
  }
  if (status?.epoch !== access.epoch) {
    throw new ContractError('unavailable', `${access.endpoint}: another epoch answered`);
  }
  return {
    endpoint: access.endpoint,
    epoch: access.epoch,
    status: status as OwnerStatusBody,
    request: (method, path, body) => call(access.endpoint, access.capability, timeoutMs, method, path, body),
    stream: (method, path, body) => callStreaming(access.endpoint, access.capability, timeoutMs, method, path, body),
  };
}
