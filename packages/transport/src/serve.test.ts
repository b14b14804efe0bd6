import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { ContractError } from '@leasehold/contracts';
import {
  codeOfAsync,
  handPlaces,
  jsonOf,
  listingOutsideStaging,
  modeOf,
  pathExists,
  replaceFile,
  serviceFences,
} from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  capabilityOf,
  closeOf,
  connectionResult,
  inspectionOf,
  endTest,
  exchange,
  jsonBody,
  keptAlive,
  openSocket,
  placeWithWorkspace,
  plainServer,
  request,
  requestBytes,
  serveHere,
  socketTo,
  witness,
  type Place,
  filesOf,
} from '../test/helpers.js';
import {
  connect,
  connectOrStart,
  fileOwnership,
  serveOwner,
  settledInspection,
  type OwnerRoutes,
  type Ownership,
  type OwnershipLease,
} from './index.js';

afterEach(endTest);

function phaseOf(place: Place): unknown {
  return (jsonOf(handPlaces(place.stateHome, place.root).registration) as { phase?: unknown } | undefined)?.phase;
}

/** A route `/hold` that answers only once `open()` is called; `arrived` resolves when a request reached it. */
function holdingRoute(): { routes: OwnerRoutes; arrived: Promise<void>; open: () => void } {
  let arrive: () => void = () => {};
  let open: () => void = () => {};
  const arrived = new Promise<void>((resolve) => {
    arrive = resolve;
  });
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const routes: OwnerRoutes = async (_request, response) => {
    arrive();
    await gate;
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('{"held":true}');
  };
  return { routes, arrived, open };
}

describe('serveOwner in this process', () => {
  it('acquires with the bound endpoint of any free port and serves its status', async () => {
    const place = placeWithWorkspace();
    const owner = await serveHere(place);
    expect(owner.serving).toMatchObject({ root: place.root, pid: process.pid });
    expect(owner.serving.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:[1-9][0-9]*$/);
    expect(owner.serving.lease.owner.endpoint).toBe(owner.serving.endpoint);
    const capability = capabilityOf(place);
    const reply = await exchange(owner.port, request('GET', '/v1/status', owner.port, capability));
    expect(jsonBody(reply)).toEqual({ epoch: owner.serving.epoch, phase: 'idle', root: place.root, pid: process.pid });
    expect(jsonOf(handPlaces(place.stateHome, place.root).config)).toMatchObject({ endpoint: 'http://127.0.0.1:0' });
  });

  it('stays up after a stop with a wrong token (401), and still answers', async () => {
    const place = placeWithWorkspace();
    const owner = await serveHere(place);
    const capability = capabilityOf(place);
    for (const token of [undefined, 'A'.repeat(43), capability.slice(1)]) {
      const refused = await exchange(owner.port, request('POST', '/v1/stop', owner.port, token));
      expect(refused.status).toBe(401);
      expect(refused.headers['www-authenticate']).toBe('Bearer');
    }
    const reply = await exchange(owner.port, request('GET', '/v1/status', owner.port, capability));
    expect(reply.status).toBe(200);
    expect(jsonBody(reply)).toMatchObject({ epoch: owner.serving.epoch, phase: 'idle' });
    expect(phaseOf(place)).toBe('idle');
    expect(owner.settled()).toBe(false);
  });

  it('stops on an authenticated POST /v1/stop: 202, stopping, drains the request in flight, releases, resolves', async () => {
    const place = placeWithWorkspace();
    const hold = holdingRoute();
    // A keep-alive timeout far away: the drained connection must not be kept open after its answer.
    const owner = await serveHere(place, { routes: hold.routes, limits: { keepAliveTimeoutMs: 600_000 } });
    const capability = capabilityOf(place);
    const held = exchange(owner.port, keptAlive('GET', '/hold', owner.port, capability));
    await hold.arrived;
    const stop = await exchange(owner.port, request('POST', '/v1/stop', owner.port, capability));
    expect(stop.status).toBe(202);
    expect(jsonBody(stop)).toMatchObject({ epoch: owner.serving.epoch, stopping: true });
    // The phase went to stopping before the 202 left, and the listener is closed: only the drain is left.
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopping', owner: { epoch: owner.serving.epoch } });
    expect(await connectionResult(owner.port)).toBe('ECONNREFUSED');
    expect(owner.settled()).toBe(false);
    hold.open();
    expect((await held).status).toBe(200);
    expect(await owner.ended).toEqual({ outcome: { reason: 'stop' } });
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: owner.serving.epoch });
    expect(serviceFences(place.stateHome, place.root)).toEqual([]);
  });

  it('does not let an idle kept-alive connection stall the stop (keep-alive timeout far away)', async () => {
    const place = placeWithWorkspace();
    const owner = await serveHere(place, { limits: { keepAliveTimeoutMs: 600_000 } });
    const capability = capabilityOf(place);
    const idle = await openSocket(owner.port);
    expect((await exchange(idle, keptAlive('GET', '/v1/status', owner.port, capability))).status).toBe(200);
    expect(idle.closed).toBe(false);
    expect((await exchange(owner.port, request('POST', '/v1/stop', owner.port, capability))).status).toBe(202);
    await closeOf(idle);
    expect(await owner.ended).toEqual({ outcome: { reason: 'stop' } });
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: owner.serving.epoch });
  });

  it('serves on [::1] when asked, checking Host against [::1]:PORT; connect reaches it', async () => {
    const place = placeWithWorkspace();
    const owner = await serveHere(place, { endpoint: 'http://[::1]:0' });
    expect(owner.serving.endpoint).toMatch(/^http:\/\/\[::1\]:[1-9][0-9]*$/);
    const capability = capabilityOf(place);
    const ask = (host: string) =>
      exchange(
        socketTo(owner.port, '::1'),
        requestBytes('GET /v1/status HTTP/1.1', [
          ['Host', host],
          ['Authorization', `Bearer ${capability}`],
          ['Connection', 'close'],
        ]),
      );
    expect((await ask(`[::1]:${owner.port}`)).status).toBe(200);
    for (const host of [`127.0.0.1:${owner.port}`, `localhost:${owner.port}`, `::1:${owner.port}`, '[::1]']) {
      expect((await ask(host)).status).toBe(421);
    }
    const connection = await connect(place.root, { ownership: filesOf(place) });
    witness(connection);
    expect(connection).toMatchObject({ endpoint: owner.serving.endpoint, epoch: owner.serving.epoch });
  });

  it('stops when aborted, the same way', async () => {
    const place = placeWithWorkspace();
    const owner = await serveHere(place);
    owner.abort();
    expect(await owner.ended).toEqual({ outcome: { reason: 'abort' } });
    expect(await connectionResult(owner.port)).toBe('ECONNREFUSED');
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: owner.serving.epoch });
  });
});

describe("a connection reads an owner's own routes however they answer", () => {
  it('JSON, text and bytes read whole; a stream answered at its headers, before its body ends', async () => {
    const place = placeWithWorkspace();
    let finish: () => void = () => {};
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const routes: OwnerRoutes = async (incoming, response) => {
      if (incoming.url === '/text')
        return void response.writeHead(200, { 'content-type': 'text/plain' }).end('héllo\n');
      if (incoming.url === '/bytes')
        return void response
          .writeHead(200, { 'content-type': 'application/octet-stream' })
          .end(Buffer.from([0, 255, 1]));
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('first\n');
      await finished;
      response.end('last\n');
    };
    const owner = await serveHere(place, { routes });
    const connection = await connect(place.root, { ownership: filesOf(place) });
    const text = await connection.request('GET', '/text');
    expect({ status: text.status, body: text.body, text: text.text }).toEqual({
      status: 200,
      body: undefined,
      text: 'héllo\n',
    });
    const bytes = await connection.request('GET', '/bytes');
    expect([...bytes.bytes]).toEqual([0, 255, 1]);
    const status = await connection.request('GET', '/v1/status');
    expect(status.body).toEqual(JSON.parse(status.text));

    // Resolved while the owner still holds the rest of the body back: its first chunk is read, then the end.
    const streamed = await connection.stream('GET', '/events');
    expect(streamed.status).toBe(200);
    const chunks: string[] = [];
    const first = new Promise<void>((resolve) => streamed.body.once('data', () => resolve()));
    streamed.body.setEncoding('utf8').on('data', (chunk: string) => chunks.push(chunk));
    await first;
    expect(chunks.join('')).toBe('first\n');
    const ended = new Promise<void>((resolve) => streamed.body.once('end', resolve));
    finish();
    await ended;
    expect(chunks.join('')).toBe('first\nlast\n');
    owner.abort();
    await owner.ended;
  });
});

describe('serveOwner refusals', () => {
  it('refuses an endpoint that is not loopback HTTP, and a port that is taken, before touching any file', async () => {
    const place = placeWithWorkspace();
    for (const endpoint of [
      'http://localhost:0',
      'http://0.0.0.0:0',
      'https://127.0.0.1:0',
      'http://127.0.0.1:0/path',
      'http://[::]:0',
    ]) {
      expect({ endpoint, code: await codeOfAsync(serveHere(place, { endpoint })) }).toEqual({
        endpoint,
        code: 'refused',
      });
    }
    const { port } = await plainServer((_request, response) => response.end());
    expect(await codeOfAsync(serveHere(place, { endpoint: `http://127.0.0.1:${port}` }))).toBe('conflict');
    expect(pathExists(place.stateHome)).toBe(false);
  });

  it('refuses (conflict) a second owner of a served workspace, and the first goes on serving', async () => {
    const place = placeWithWorkspace();
    const first = await serveHere(place);
    const capability = capabilityOf(place);
    const before = listingOutsideStaging(place.stateHome);
    expect(await codeOfAsync(serveHere(place))).toBe('conflict');
    expect(listingOutsideStaging(place.stateHome)).toEqual(before);
    expect((await exchange(first.port, request('GET', '/v1/status', first.port, capability))).status).toBe(200);
    expect(first.settled()).toBe(false);
  });
});

describe('a state home a person made with mkdir (0755) before the first serve', () => {
  it('empty: serveOwner takes it, made 0700, and serves; holding a file: refused with the chmod that fixes it', async () => {
    const place = placeWithWorkspace();
    mkdirSync(place.stateHome);
    chmodSync(place.stateHome, 0o755);
    const owner = await serveHere(place);
    expect(modeOf(place.stateHome)).toBe(0o700);
    capabilityOf(place);
    owner.abort();
    expect((await owner.ended).outcome).toBeDefined();

    const other = placeWithWorkspace();
    mkdirSync(other.stateHome);
    writeFileSync(join(other.stateHome, 'notes.txt'), 'mine', { mode: 0o600 });
    chmodSync(other.stateHome, 0o755);
    await expect(serveHere(other)).rejects.toMatchObject({
      code: 'refused',
      path: other.stateHome,
      remedy: `take the group and other bits away: \`chmod 700 ${other.stateHome}\``,
    });
    expect(modeOf(other.stateHome)).toBe(0o755);
  });
});

describe('bounds against hostile local clients', () => {
  it('answers 431 (from Node) to a head over limits.headerBytes, before any check', async () => {
    const place = placeWithWorkspace();
    const owner = await serveHere(place, { limits: { headerBytes: 2048 } });
    const capability = capabilityOf(place);
    const padded = (size: number, token?: string) =>
      request('GET', '/v1/status', owner.port, token, [['X-Padding', 'a'.repeat(size)]]);
    expect((await exchange(owner.port, padded(1024, capability))).status).toBe(200);
    for (const token of [capability, undefined]) {
      const reply = await exchange(owner.port, padded(4096, token));
      expect(reply.status).toBe(431);
      expect(reply.error ?? '').not.toBe('ECONNREFUSED');
    }
    // Many small headers over the bound too.
    const many = requestBytes('GET /v1/status HTTP/1.1', [
      ['Host', `127.0.0.1:${owner.port}`],
      ['Authorization', `Bearer ${capability}`],
      ...Array.from({ length: 200 }, (_, index): [string, string] => [`X-Header-${index}`, 'value']),
    ]);
    expect((await exchange(owner.port, many)).status).toBe(431);
    expect((await exchange(owner.port, request('GET', '/v1/status', owner.port, capability))).status).toBe(200);
  });

  it('refuses connections over limits.connections (500 at once), stays up, serves the held ones, then new ones', async () => {
    const place = placeWithWorkspace();
    const LIMIT = 5;
    const TOTAL = 500;
    const owner = await serveHere(place, {
      limits: { connections: LIMIT, headersTimeoutMs: 60_000, requestTimeoutMs: 60_000 },
    });
    const capability = capabilityOf(place);
    const sockets = Array.from({ length: TOTAL }, () => socketTo(owner.port));
    const closed = new Set<Socket>();
    await new Promise<void>((excessClosed) => {
      for (const socket of sockets) {
        socket.once('close', () => {
          closed.add(socket);
          if (closed.size === TOTAL - LIMIT) excessClosed();
        });
      }
    });
    const held = sockets.filter((socket) => !closed.has(socket));
    expect(held).toHaveLength(LIMIT);
    // While it is full, one more is closed without a byte.
    const refused = await exchange(owner.port, request('GET', '/v1/status', owner.port, capability));
    expect(refused.status).toBe(0);
    expect(refused.text).toBe('');
    // The held connections are served (and closed by the server after their answer).
    for (const socket of held) {
      const reply = await exchange(socket, request('GET', '/v1/status', owner.port, capability));
      expect(reply.status).toBe(200);
      await closeOf(socket);
    }
    expect(closed.size).toBe(TOTAL);
    // Room again: a new connection is served.
    const again = await exchange(owner.port, request('GET', '/v1/status', owner.port, capability));
    expect(jsonBody(again)).toMatchObject({ epoch: owner.serving.epoch });
    expect(owner.settled()).toBe(false);
  });

  it('serves others while a client sends nothing, or half a head; the server then closes those itself', async () => {
    const place = placeWithWorkspace();
    const owner = await serveHere(place, { limits: { headersTimeoutMs: 200, requestTimeoutMs: 400 } });
    const capability = capabilityOf(place);
    const silent = await openSocket(owner.port);
    const slow = await openSocket(owner.port);
    const silentEnd = exchange(silent, '');
    const slowEnd = exchange(
      slow,
      `GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1:${owner.port}\r\nAuthorization: Bearer `,
    );
    for (let index = 0; index < 20; index += 1) {
      const reply = await exchange(owner.port, request('GET', '/v1/status', owner.port, capability));
      expect(reply.status).toBe(200);
    }
    // Neither was closed by this test: the server's timeouts end them (408, or a plain close).
    for (const end of await Promise.all([silentEnd, slowEnd])) {
      expect([0, 408]).toContain(end.status);
    }
    expect(silent.closed && slow.closed).toBe(true);
    expect((await exchange(owner.port, request('GET', '/v1/status', owner.port, capability))).status).toBe(200);
    expect(owner.settled()).toBe(false);
  });

  it('does not let a silent or half-sent connection hold a clean stop: the drain is bounded by requestTimeoutMs', async () => {
    const place = placeWithWorkspace();
    // Closing the server stops Node's own head and request timeouts: only the bounded drain ends these.
    const owner = await serveHere(place, { limits: { headersTimeoutMs: 300, requestTimeoutMs: 300 } });
    const silent = await openSocket(owner.port);
    const slow = await openSocket(owner.port);
    const ends = [exchange(silent, ''), exchange(slow, `GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1:${owner.port}\r\n`)];
    owner.abort();
    expect(await owner.ended).toEqual({ outcome: { reason: 'abort' } });
    await Promise.all(ends);
    expect(silent.closed && slow.closed).toBe(true);
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped' });
  });
});

describe('a lease lost while stopping', () => {
  it('rejects, closes the listener, and touches no file, when the stop itself finds the files changed', async () => {
    const place = placeWithWorkspace();
    // The self-fence timer is far away: the stop is the first to look at the files.
    const owner = await serveHere(place, { watchIntervalMs: 600_000 });
    const capability = capabilityOf(place);
    const { registration } = handPlaces(place.stateHome, place.root);
    replaceFile(place.base, registration, readFileSync(registration));
    const changed = listingOutsideStaging(place.stateHome);
    owner.abort();
    const end = await owner.ended;
    expect(ContractError.is(end.error)).toBe(true);
    expect(await connectionResult(owner.port)).toBe('ECONNREFUSED');
    expect(listingOutsideStaging(place.stateHome)).toEqual(changed);
    expect(capability).toBeTruthy();
  });
});

/**
 * A backend over this place's files whose leases the test can take away: the
 * loss reaches serveOwner only through the interface (`watch`, `assert`), the
 * files stay exactly as the owner left them.
 */
function revocable(place: Place): {
  ownership: Ownership;
  revoke: (error: Error) => void;
  held: () => OwnershipLease | undefined;
} {
  const files = filesOf(place);
  const watchers = new Set<(error: unknown) => void>();
  let revoked: Error | undefined;
  let held: OwnershipLease | undefined;
  const ownership: Ownership = {
    ...files,
    async acquire(...args) {
      const lease = await files.acquire(...args);
      held = lease;
      return {
        root: lease.root,
        get owner() {
          return lease.owner;
        },
        async assert() {
          if (revoked !== undefined) throw revoked;
          await lease.assert();
        },
        phase: (phase) => lease.phase(phase),
        release: () => lease.release(),
        watch(intervalMs, onLost) {
          watchers.add(onLost);
          const stop = lease.watch(intervalMs, onLost);
          return () => {
            watchers.delete(onLost);
            stop();
          };
        },
        localAccess: () => lease.localAccess(),
        fenceProcess: (pid) => lease.fenceProcess(pid),
      };
    },
  };
  const revoke = (error: Error) => {
    revoked = error;
    for (const onLost of [...watchers]) onLost(error);
    watchers.clear();
  };
  return { ownership, revoke, held: () => held };
}

describe('serveOwner and connect on an explicit ownership', () => {
  it('serve and connect through the ownership given, never the state home of the options', async () => {
    const place = placeWithWorkspace();
    const elsewhere: Place = { ...place, stateHome: join(place.base, 'elsewhere') };
    const ownership = fileOwnership({ stateHome: elsewhere.stateHome });
    const owner = await serveHere(place, { ownership });
    capabilityOf(elsewhere);
    expect(owner.serving.lease.owner).toMatchObject({
      endpoint: owner.serving.endpoint,
      epoch: owner.serving.epoch,
      phase: 'idle',
    });
    expect(await ownership.inspect(place.root)).toMatchObject({
      status: 'unavailable',
      owner: { epoch: owner.serving.epoch },
    });
    // The options' state home holds nothing of it, and says whose it is: the folder's own mark.
    expect(await inspectionOf(place)).toMatchObject({
      status: 'unavailable',
      marked: { stateHome: elsewhere.stateHome, epoch: owner.serving.epoch },
    });

    const connection = await connect(place.root, { ownership });
    witness(connection);
    expect(connection.status).toEqual({
      epoch: owner.serving.epoch,
      phase: 'idle',
      root: place.root,
      pid: process.pid,
    });
    expect(await codeOfAsync(connect(place.root, { ownership: filesOf(place) }))).toBe('unavailable');
    expect((await connection.request('POST', '/v1/stop')).status).toBe(202);
    expect(await owner.ended).toEqual({ outcome: { reason: 'stop' } });
    expect(await ownership.inspect(place.root)).toMatchObject({ status: 'stopped', epoch: owner.serving.epoch });
  });

  it('closes the listener, touches no file and rejects with the reason when the lease reports its loss through the interface', async () => {
    const place = placeWithWorkspace();
    const { ownership, revoke, held } = revocable(place);
    // The self-fence timer is far away: only the interface's report can end the owner.
    const owner = await serveHere(place, { ownership, watchIntervalMs: 600_000 });
    const capability = capabilityOf(place);
    expect((await exchange(owner.port, request('GET', '/v1/status', owner.port, capability))).status).toBe(200);
    const before = listingOutsideStaging(place.stateHome);
    const lost = new ContractError('conflict', 'the test took the lease away');
    revoke(lost);
    expect(await owner.ended).toEqual({ error: lost });
    expect(await connectionResult(owner.port)).toBe('ECONNREFUSED');
    expect(listingOutsideStaging(place.stateHome)).toEqual(before);
    expect(phaseOf(place)).toBe('idle');
    // The files' own lease is still whole underneath: the test gives it back.
    await held()?.release();
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: owner.serving.epoch });
  });
});

describe('a call without an ownership', () => {
  /** The error a call rejects with; the test fails when it resolves. */
  async function rejectionOf(call: () => Promise<unknown>): Promise<unknown> {
    return call().then(
      () => expect.fail('it resolved'),
      (error: unknown) => error,
    );
  }

  it('is refused, naming the option, with nothing bound or written: the transport picks no backend itself', async () => {
    const place = placeWithWorkspace();
    // What a caller without types could pass: no `ownership`, and no state home to fall back on.
    const untyped = (options: object) => options as never;
    const calls: Record<string, () => Promise<unknown>> = {
      connect: () => connect(place.root, untyped({})),
      connectOrStart: () => connectOrStart(place.root, untyped({ start: () => expect.fail('started') })),
      serveOwner: () => serveOwner(place.root, untyped({ policy: new Uint8Array(), signals: [] })),
      settledInspection: () => settledInspection(undefined as never, place.root),
    };
    for (const [name, call] of Object.entries(calls)) {
      const error = await rejectionOf(call);
      expect(ContractError.is(error, 'refused')).toBe(true);
      expect(error).toMatchObject({
        message: `${name}: the option \`ownership\` is required: @leasehold/transport picks no backend itself`,
        remedy: expect.stringContaining('openStateHome'),
      });
    }
    expect(pathExists(place.stateHome)).toBe(false);
  });
});
