import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { RequestListener } from 'node:http';
import { ContractError } from '@leasehold/contracts';
import { handPlaces, replaceFile } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  acquireFor,
  capabilityOf,
  endTest,
  exchange,
  jsonBody,
  placeWithWorkspace,
  plainServer,
  request,
  requestBytes,
  witness,
  type Place,
  type RawReply,
} from '../test/helpers.js';
import { DEFAULT_LIMITS, ownerHandler, readBody, type OwnerRoutes, type OwnershipLease } from './index.js';

afterEach(endTest);

/** An owner on the test's own node:http server: its lease, and the handler for it beside nothing else. */
interface OwnServer {
  readonly place: Place;
  readonly port: number;
  lease: OwnershipLease;
  capability: string;
  /** How many times onStop was called. */
  stops: number;
  /** The paths the owner's routes were called for. */
  readonly routed: string[];
  /** Releases the lease, acquires again on the same port and serves the new lease. */
  reacquire(): Promise<void>;
}

async function ownServer(routes?: OwnerRoutes): Promise<OwnServer> {
  const place = placeWithWorkspace();
  let handler: RequestListener = (_request, response) => {
    response.writeHead(503);
    response.end();
  };
  const { port } = await plainServer((incoming, response) => handler(incoming, response));
  const routed: string[] = [];
  const serve = (lease: OwnershipLease) => {
    handler = ownerHandler({
      lease,
      onStop: () => {
        owner.stops += 1;
      },
      ...(routes === undefined
        ? {}
        : {
            routes: (incoming, response) => {
              routed.push(incoming.url ?? '');
              return routes(incoming, response);
            },
          }),
    });
  };
  const lease = await acquireFor(place, port);
  const owner: OwnServer = {
    place,
    port,
    lease,
    capability: capabilityOf(place),
    stops: 0,
    routed,
    async reacquire() {
      await owner.lease.release();
      owner.lease = await acquireFor(place, port);
      owner.capability = capabilityOf(place);
      serve(owner.lease);
    },
  };
  serve(lease);
  return owner;
}

const hello: OwnerRoutes = (_request, response) => {
  response.writeHead(200, { 'content-type': 'application/json' });
  response.end('{"hello":"world"}');
};

/** A token of the capability's shape that is not the capability. */
function otherToken(): string {
  return randomBytes(32).toString('base64url');
}

function expectUnauthorized(reply: RawReply): void {
  expect(reply.status).toBe(401);
  expect(reply.headers['www-authenticate']).toBe('Bearer');
}

describe('GET /v1/status', () => {
  it('answers { epoch, phase, root, pid } to the right Host and bearer, and nothing else', async () => {
    const owner = await ownServer();
    const reply = await exchange(owner.port, request('GET', '/v1/status', owner.port, owner.capability));
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.headers['cache-control']).toBe('no-store');
    expect(jsonBody(reply)).toEqual({
      epoch: owner.lease.owner.epoch,
      phase: 'idle',
      root: owner.place.root,
      pid: process.pid,
    });
    // A query string does not change the route.
    const queried = await exchange(owner.port, request('GET', '/v1/status?verbose=1', owner.port, owner.capability));
    expect(jsonBody(queried)).toEqual(jsonBody(reply));
  });

  it('answers the phase the lease is in', async () => {
    const owner = await ownServer();
    await owner.lease.phase('stopping');
    const reply = await exchange(owner.port, request('GET', '/v1/status', owner.port, owner.capability));
    expect(jsonBody(reply)).toMatchObject({ phase: 'stopping' });
  });

  it('answers 503, never the epoch, once the lease is lost (a file changed under the owner)', async () => {
    const owner = await ownServer();
    const { registration } = handPlaces(owner.place.stateHome, owner.place.root);
    replaceFile(owner.place.base, registration, readFileSync(registration));
    const reply = await exchange(owner.port, request('GET', '/v1/status', owner.port, owner.capability));
    expect(reply.status).toBe(503);
    expect(reply.body).not.toContain(owner.lease.owner.epoch);
    const stop = await exchange(owner.port, request('POST', '/v1/stop', owner.port, owner.capability));
    expect(stop.status).toBe(503);
    expect(owner.stops).toBe(0);
  });
});

describe('the bearer check', () => {
  it('answers 401 with WWW-Authenticate: Bearer without a token, with a wrong one, or with one of another shape', async () => {
    const owner = await ownServer(hello);
    const wrong = [
      undefined,
      otherToken(),
      owner.capability.slice(0, 42),
      `${owner.capability}A`,
      owner.capability.toLowerCase() === owner.capability
        ? owner.capability.toUpperCase()
        : owner.capability.toLowerCase(),
    ];
    for (const token of wrong) {
      for (const path of ['/v1/status', '/hello']) {
        expectUnauthorized(await exchange(owner.port, request('GET', path, owner.port, token)));
      }
    }
    for (const authorization of [
      `Basic ${owner.capability}`,
      `bearer ${owner.capability}`,
      owner.capability,
      'Bearer',
      'Bearer ',
      '',
    ]) {
      const bytes = requestBytes('GET /v1/status HTTP/1.1', [
        ['Host', `127.0.0.1:${owner.port}`],
        ['Authorization', authorization],
        ['Connection', 'close'],
      ]);
      expectUnauthorized(await exchange(owner.port, bytes));
    }
    expect(owner.routed).toEqual([]);
    // The right one still works.
    expect((await exchange(owner.port, request('GET', '/hello', owner.port, owner.capability))).status).toBe(200);
  });

  it("refuses a previous epoch's capability (acquire, release, acquire again)", async () => {
    const owner = await ownServer();
    const first = owner.capability;
    const firstEpoch = owner.lease.owner.epoch;
    await owner.reacquire();
    expect(owner.capability).not.toBe(first);
    expectUnauthorized(await exchange(owner.port, request('GET', '/v1/status', owner.port, first)));
    expectUnauthorized(await exchange(owner.port, request('POST', '/v1/stop', owner.port, first)));
    expect(owner.stops).toBe(0);
    const reply = await exchange(owner.port, request('GET', '/v1/status', owner.port, owner.capability));
    expect(reply.status).toBe(200);
    expect(jsonBody(reply).epoch).toBe(owner.lease.owner.epoch);
    expect(jsonBody(reply).epoch).not.toBe(firstEpoch);
  });
});

describe('the Host check comes first', () => {
  it('answers 421 to any other Host, with or without the right bearer, and closes the connection', async () => {
    const owner = await ownServer(hello);
    const others = [
      `localhost:${owner.port}`,
      `127.0.0.1:${owner.port + 1 > 65535 ? owner.port - 1 : owner.port + 1}`,
      '127.0.0.1',
      `127.0.0.1:0${owner.port}`,
      `[::1]:${owner.port}`,
      `rebound.example:${owner.port}`,
      `127.0.0.1:${owner.port}.rebound.example`,
    ];
    for (const host of others) {
      for (const token of [owner.capability, undefined, otherToken()]) {
        for (const path of ['/v1/status', '/hello', '/v1/stop']) {
          const headers: [string, string][] = [['Host', host]];
          if (token !== undefined) headers.push(['Authorization', `Bearer ${token}`]);
          const reply = await exchange(owner.port, requestBytes(`GET ${path} HTTP/1.1`, headers));
          expect({ host, status: reply.status }).toEqual({ host, status: 421 });
          expect(reply.headers.connection).toBe('close');
          expect(reply.headers['www-authenticate']).toBeUndefined();
        }
      }
    }
    expect(owner.routed).toEqual([]);
    expect(owner.stops).toBe(0);
  });

  it('answers 400 to a request without Host (HTTP/1.0 reaches the handler; HTTP/1.1 is refused by Node)', async () => {
    const owner = await ownServer(hello);
    for (const version of ['HTTP/1.0', 'HTTP/1.1']) {
      for (const path of ['/v1/status', '/hello']) {
        const reply = await exchange(
          owner.port,
          requestBytes(`GET ${path} ${version}`, [['Authorization', `Bearer ${owner.capability}`]]),
        );
        expect({ version, path, status: reply.status }).toEqual({ version, path, status: 400 });
      }
    }
    expect(owner.routed).toEqual([]);
  });

  it('answers 421 to an absolute-URI request line, even with the right Host and bearer', async () => {
    const owner = await ownServer(hello);
    for (const target of [
      `http://127.0.0.1:${owner.port}/v1/status`,
      `http://127.0.0.1:${owner.port}/hello`,
      `http://rebound.example:${owner.port}/v1/status`,
      `HTTP://127.0.0.1:${owner.port}/v1/status`,
    ]) {
      const reply = await exchange(owner.port, request('GET', target, owner.port, owner.capability));
      expect({ target, status: reply.status }).toEqual({ target, status: 421 });
    }
    // The asterisk form (OPTIONS *) is no path either.
    expect((await exchange(owner.port, request('OPTIONS', '*', owner.port, owner.capability))).status).toBe(421);
    expect(owner.routed).toEqual([]);
  });

  it('answers 400 to two Host headers or two Authorization headers, even when both are right', async () => {
    const owner = await ownServer(hello);
    const host: [string, string] = ['Host', `127.0.0.1:${owner.port}`];
    const bearer: [string, string] = ['Authorization', `Bearer ${owner.capability}`];
    const cases: [string, [string, string][]][] = [
      ['two equal Host', [host, host, bearer]],
      ['Host, then another', [host, ['Host', 'rebound.example'], bearer]],
      ['another, then Host', [['Host', 'rebound.example'], host, bearer]],
      ['two equal Authorization', [host, bearer, bearer]],
      ['a wrong, then the right Authorization', [host, ['Authorization', `Bearer ${otherToken()}`], bearer]],
      ['the right, then a wrong Authorization', [host, bearer, ['Authorization', `Bearer ${otherToken()}`]]],
      ['differently cased names', [host, ['host', `127.0.0.1:${owner.port}`], bearer]],
    ];
    for (const [label, headers] of cases) {
      for (const path of ['/v1/status', '/hello', '/v1/stop']) {
        const reply = await exchange(
          owner.port,
          requestBytes(`${path === '/v1/stop' ? 'POST' : 'GET'} ${path} HTTP/1.1`, headers),
        );
        expect({ label, path, status: reply.status }).toEqual({ label, path, status: 400 });
      }
    }
    expect(owner.routed).toEqual([]);
    expect(owner.stops).toBe(0);
  });
});

describe('routes', () => {
  it('answers 405 with Allow to the wrong method of a contract path', async () => {
    const owner = await ownServer(hello);
    for (const [method, path, allow] of [
      ['POST', '/v1/status', 'GET'],
      ['DELETE', '/v1/status', 'GET'],
      ['GET', '/v1/stop', 'POST'],
      ['PUT', '/v1/stop', 'POST'],
    ] as const) {
      const reply = await exchange(owner.port, request(method, path, owner.port, owner.capability));
      expect({ method, path, status: reply.status, allow: reply.headers.allow }).toEqual({
        method,
        path,
        status: 405,
        allow,
      });
    }
    expect(owner.stops).toBe(0);
    expect(owner.routed).toEqual([]);
  });

  it('answers 404 to any other path when the owner has no routes, and 401 first to an unauthenticated one', async () => {
    const owner = await ownServer();
    for (const path of ['/', '/hello', '/v1', '/v1/status/', '/v1/statusx', '/v2/status']) {
      expect((await exchange(owner.port, request('GET', path, owner.port, owner.capability))).status).toBe(404);
      expectUnauthorized(await exchange(owner.port, request('GET', path, owner.port)));
    }
  });

  it("reaches the owner's routes only after both checks; the route never runs otherwise", async () => {
    const owner = await ownServer(hello);
    expectUnauthorized(await exchange(owner.port, request('GET', '/hello', owner.port)));
    expectUnauthorized(await exchange(owner.port, request('GET', '/hello', owner.port, otherToken())));
    const misdirected = requestBytes('GET /hello HTTP/1.1', [
      ['Host', 'rebound.example'],
      ['Authorization', `Bearer ${owner.capability}`],
    ]);
    expect((await exchange(owner.port, misdirected)).status).toBe(421);
    expect(owner.routed).toEqual([]);
    const reply = await exchange(owner.port, request('GET', '/hello?x=1', owner.port, owner.capability));
    expect(reply.status).toBe(200);
    expect(jsonBody(reply)).toEqual({ hello: 'world' });
    expect(owner.routed).toEqual(['/hello?x=1']);
  });

  it('answers 500 when a route throws or rejects, and goes on serving', async () => {
    const owner = await ownServer((incoming, response) => {
      if (incoming.url === '/throws') throw new Error('route failure');
      if (incoming.url === '/rejects') return Promise.reject(new Error('route failure'));
      if (incoming.url === '/late') {
        response.writeHead(200, { 'content-type': 'text/plain' });
        response.write('partial');
        throw new Error('route failure after its head');
      }
      return hello(incoming, response);
    });
    for (const path of ['/throws', '/rejects']) {
      const reply = await exchange(owner.port, request('GET', path, owner.port, owner.capability));
      expect(reply.status).toBe(500);
      expect(reply.body).not.toContain('route failure');
    }
    // A route that fails after its head was sent: the connection is cut rather than the answer completed.
    const late = await exchange(owner.port, request('GET', '/late', owner.port, owner.capability));
    expect([0, 200]).toContain(late.status);
    expect(late.text.endsWith('0\r\n\r\n')).toBe(false);
    expect((await exchange(owner.port, request('GET', '/hello', owner.port, owner.capability))).status).toBe(200);
    expect((await exchange(owner.port, request('GET', '/v1/status', owner.port, owner.capability))).status).toBe(200);
  });
});

describe('POST /v1/stop', () => {
  it('answers 202 with the status and Connection: close, and calls onStop once, to the right bearer only', async () => {
    const owner = await ownServer();
    expectUnauthorized(await exchange(owner.port, request('POST', '/v1/stop', owner.port, otherToken())));
    expectUnauthorized(await exchange(owner.port, request('POST', '/v1/stop', owner.port)));
    expect(owner.stops).toBe(0);
    const reply = await exchange(owner.port, request('POST', '/v1/stop', owner.port, owner.capability));
    expect(reply.status).toBe(202);
    expect(reply.headers.connection).toBe('close');
    expect(jsonBody(reply)).toEqual({
      epoch: owner.lease.owner.epoch,
      phase: 'idle',
      root: owner.place.root,
      pid: process.pid,
      stopping: true,
    });
    expect(owner.stops).toBe(1);
  });
});

describe('request bodies', () => {
  it('answers 413 to a Content-Length over the limit, after the checks, without reading the body', async () => {
    const owner = await ownServer(hello);
    const over = String(DEFAULT_LIMITS.bodyBytes + 1);
    for (const path of ['/hello', '/v1/status', '/v1/stop']) {
      const reply = await exchange(
        owner.port,
        request('POST', path, owner.port, owner.capability, [['Content-Length', over]]),
      );
      expect({ path, status: reply.status }).toEqual({ path, status: 413 });
      expect(reply.headers.connection).toBe('close');
    }
    // Unauthenticated, it is 401 first: nothing about the body is judged.
    expectUnauthorized(
      await exchange(owner.port, request('POST', '/hello', owner.port, undefined, [['Content-Length', over]])),
    );
    expect(owner.routed).toEqual([]);
    expect(owner.stops).toBe(0);
    const at = requestBytes(
      'POST /hello HTTP/1.1',
      [
        ['Host', `127.0.0.1:${owner.port}`],
        ['Authorization', `Bearer ${owner.capability}`],
        ['Connection', 'close'],
        ['Content-Length', '2'],
      ],
      '{}',
    );
    expect((await exchange(owner.port, at)).status).toBe(200);
  });

  it('readBody gives the body within its bound, and rejects with capacity over it (closing the connection)', async () => {
    let failed: (code: string) => void = () => {};
    const failure = new Promise<string>((resolve) => {
      failed = resolve;
    });
    const owner = await ownServer(async (incoming, response) => {
      try {
        const body = await readBody(incoming, 16);
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ bytes: body.byteLength, text: Buffer.from(body).toString('utf8') }));
      } catch (error) {
        witness(error);
        failed(ContractError.is(error) ? error.code : 'not a ContractError');
      }
    });
    const send = (body: string) =>
      exchange(
        owner.port,
        requestBytes(
          'POST /echo HTTP/1.1',
          [
            ['Host', `127.0.0.1:${owner.port}`],
            ['Authorization', `Bearer ${owner.capability}`],
            ['Connection', 'close'],
            ['Content-Length', String(Buffer.byteLength(body))],
          ],
          body,
        ),
      );
    const within = await send('sixteen bytes ok');
    expect(jsonBody(within)).toEqual({ bytes: 16, text: 'sixteen bytes ok' });
    const over = await send('x'.repeat(100));
    expect(await failure).toBe('capacity');
    expect(over.status).toBe(0);
    expect((await exchange(owner.port, request('GET', '/v1/status', owner.port, owner.capability))).status).toBe(200);
  });
});
