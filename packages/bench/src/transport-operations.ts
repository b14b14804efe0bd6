import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { encode } from '@leasehold/contracts';
import { DEFAULT_LIMITS, connect, fileOwnership, serveOwner } from '@leasehold/transport';
import type { BenchPlace } from './fixtures.js';
import { timedAsync, type Operation } from './harness.js';

// Section 4, transport: what a client pays to prove an owner live and make one
// authenticated call, against the bare HTTP round trip it is built on.

/** Operations plus the owner and the bare server they talk to, until the end of the run. */
export interface TransportSuite {
  readonly operations: Operation[];
  /** The owner's workspace and state home: it serves until `close`. */
  readonly owner: { readonly workspace: string; readonly stateHome: string };
  /** Stops the owner (a clean release) and closes the bare server. */
  close: () => Promise<void>;
}

/** One GET with node's default agent, as `connect` makes them; resolves with the status once the body is read. */
function get(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const outgoing = request({ host: '127.0.0.1', port, path }, (incoming) => {
      incoming.resume();
      incoming.on('end', () => resolve(incoming.statusCode ?? 0));
      incoming.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}

/**
 * An owner served by `serveOwner` in this process (its own state home), and
 * a bare `node:http` server on loopback answering a status body of the same
 * shape, with the same keep-alive timeout: node's agent then opens a fresh
 * connection for every request to either (a 1 s hint leaves it no safe reuse).
 */
export async function transportOperations(place: BenchPlace): Promise<TransportSuite> {
  // The file backend, named: the transport picks none itself. One ownership, as a client keeps one.
  const ownership = fileOwnership({ stateHome: join(place.root, 'state-transport') });
  const workspace = place.workspace();
  const stop = new AbortController();
  let epoch = '';
  let markServing!: () => void;
  const served = new Promise<void>((resolve) => (markServing = resolve));
  const owner = serveOwner(workspace, {
    policy: encode({ policy: 'leasehold-bench-transport' }),
    ownership,
    // The bench's own SIGINT handler stays in charge; the abort in close() stops the owner.
    signals: [],
    signal: stop.signal,
    // The self-fence's re-assertion would otherwise run on this process's clock during other operations.
    watchIntervalMs: 3_600_000,
    onServing: (started) => {
      epoch = started.epoch;
      markServing();
    },
  });
  await Promise.race([
    served,
    owner.then(() => {
      throw new Error('transport: the owner stopped before it served');
    }),
  ]);

  const body = JSON.stringify({ epoch, phase: 'idle', root: workspace, pid: process.pid });
  const bare = createServer({ keepAliveTimeout: DEFAULT_LIMITS.keepAliveTimeoutMs }, (_, response) => {
    response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    response.end(`${body}\n`);
  });
  await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));
  const barePort = (bare.address() as AddressInfo).port;

  const operations = [
    timedAsync('http.get', 'bare node:http GET on loopback', {
      run: async () => {
        if ((await get(barePort, '/v1/status')) !== 200) throw new Error('http.get: not 200');
      },
    }),
    // connect() proves the owner by one authenticated GET /v1/status, whose answer it returns: that
    // is the one round trip a client needs before its own requests.
    timedAsync('transport.connect', 'connect(): its one authenticated GET /v1/status', {
      run: async () => {
        const connection = await connect(workspace, { ownership });
        if (connection.status.epoch === undefined) throw new Error('transport.connect: no status');
      },
    }),
  ];
  return {
    operations,
    owner: { workspace, stateHome: ownership.stateHome },
    async close() {
      stop.abort();
      await owner;
      await new Promise((resolve) => bare.close(resolve));
    },
  };
}
