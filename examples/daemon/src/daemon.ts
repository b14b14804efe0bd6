#!/usr/bin/env node
/**
 * An example daemon: the one owner of a workspace folder, through
 * `@leasehold/coordination`, exactly as a downstream service would use it.
 *
 *   node dist/daemon.js [--workspace DIR] [--state-home DIR] [--watch-ms N]
 *
 * It binds an HTTP server on 127.0.0.1 (any free port), acquires the
 * workspace with that bound endpoint, and answers `GET /hello` only to
 * clients that send the workspace's capability. Local clients find the
 * endpoint and the capability with `ServiceCoordination.localAccess()`.
 *
 * Standard output carries one JSON line per event, for supervisors and tests
 * (the capability never appears on it, nor on standard error):
 *
 *   {"event":"ready","endpoint":"http://127.0.0.1:PORT","epoch":"…","pid":N}
 *   {"event":"refused","code":"conflict"}       exit 1: not the owner (another owner, quarantine, …)
 *   {"event":"lost","code":"conflict"}          exit 2: our files changed under us; nothing touched
 *   {"event":"released","epoch":"…"}            exit 0: after SIGINT or SIGTERM
 *   {"event":"release-failed","code":"busy"}    exit 1: fences remain; see `leasehold status`
 */
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ContractError, sha256, type OwnerConfig } from '@leasehold/contracts';
import { ServiceCoordination, resolveWorkspace, type OwnerLease } from '@leasehold/coordination';

/**
 * This service's policy document. Coordination never reads it: it publishes
 * it as `host-config.json` for a new workspace and checks only that its
 * SHA-256 is the config's `policyIdentity`, so a daemon with another policy
 * cannot take over a workspace set up for this one (`conflict`).
 */
const POLICY_BYTES = new TextEncoder().encode(
  JSON.stringify({ service: 'leasehold-example-daemon', routes: ['GET /hello'] }),
);

/** Port 0: "any free port". The port actually bound is handed to `acquire`. */
const CONFIG: OwnerConfig = {
  schema: 'leasehold.owner-config/1',
  endpoint: 'http://127.0.0.1:0',
  policyIdentity: sha256(POLICY_BYTES),
};

interface Options {
  readonly workspace: string;
  readonly stateHome: string | undefined;
  readonly watchMs: number;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      workspace: { type: 'string', default: process.cwd() },
      'state-home': { type: 'string' },
      // How often the self-fence re-checks the owner's files (tests use a short one).
      'watch-ms': { type: 'string', default: '1000' },
    },
    strict: true,
  });
  if (!/^[1-9][0-9]{0,6}$/.test(values['watch-ms'])) {
    throw new TypeError('--watch-ms: a whole number of milliseconds, from 1');
  }
  return {
    workspace: values.workspace,
    // Coordination wants an absolute, normalised state home: resolve a relative one here.
    stateHome: values['state-home'] === undefined ? undefined : resolve(values['state-home']),
    watchMs: Number(values['watch-ms']),
  };
}

/** Prints one event line on standard output. */
function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

let exiting = false;

/** Prints the last event line, then exits once it is written. Only the first call counts. */
function exitWith(code: number, event: Record<string, unknown>): void {
  if (exiting) return;
  exiting = true;
  process.stdout.write(`${JSON.stringify(event)}\n`, () => process.exit(code));
}

function codeOf(error: unknown): string {
  return ContractError.is(error) ? error.code : 'unknown';
}

/** Stops accepting connections and drops the open ones (keep-alive included). */
function closeServer(server: Server): Promise<void> {
  return new Promise((done) => {
    server.close(() => done());
    server.closeAllConnections();
  });
}

/** What requests are checked against, once this process owns the workspace. */
interface Serving {
  /** The only `Host` we answer: our own address, never a name a browser page chose. */
  readonly host: string;
  readonly epoch: string;
  /** `Bearer <capability>`: the secret. Compared, never printed. */
  readonly authorization: Buffer;
}

function reply(response: ServerResponse, status: number, body: Record<string, unknown>): void {
  response.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  response.end(JSON.stringify(body));
}

function handle(serving: Serving | undefined, request: IncomingMessage, response: ServerResponse): void {
  // Bound but not yet the owner (acquire is running): answer nothing of substance.
  if (serving === undefined) return reply(response, 503, { error: 'starting' });
  // 1. Host first. A web page that rebinds its own domain name to 127.0.0.1
  //    can reach this port, but its requests carry its name in `Host`.
  if (request.headers.host !== serving.host) return reply(response, 421, { error: 'misdirected request' });
  // 2. The capability, compared in constant time. Any local process can
  //    connect; only those that could read the 0600 capability file get in.
  const given = Buffer.from(request.headers.authorization ?? '');
  if (given.length !== serving.authorization.length || !timingSafeEqual(given, serving.authorization)) {
    response.setHeader('www-authenticate', 'Bearer');
    return reply(response, 401, { error: 'unauthorized' });
  }
  if (request.method === 'GET' && request.url === '/hello') {
    return reply(response, 200, { epoch: serving.epoch, message: 'hello from the owner of this workspace' });
  }
  return reply(response, 404, { error: 'not found' });
}

async function main(): Promise<void> {
  let options: Options;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (error) {
    console.error(`example-daemon: ${(error as Error).message}`);
    process.exitCode = 64; // EX_USAGE
    return;
  }

  // Bind FIRST, so the endpoint we register is one we actually hold: no other
  // process can be listening on it while we are registered.
  let serving: Serving | undefined;
  const server = createServer((request, response) => handle(serving, request, response));
  await new Promise<void>((listening, failed) => {
    server.once('error', failed);
    server.listen(0, '127.0.0.1', () => listening());
  });
  const { port } = server.address() as AddressInfo;

  // Signals are handled from the start: a SIGTERM that arrives while acquire
  // is writing must not kill us half way (that would leave fences that only
  // `leasehold recover` lifts). We finish acquiring, then release.
  let lease: OwnerLease | undefined;
  let stopping = false;
  const stop = async (owner: OwnerLease): Promise<void> => {
    try {
      owner.phase('stopping'); // clients that inspect now read `stopping`
      await closeServer(server); // no request is answered after this line
      await owner.release(); // registration stopped, capability, owner.lock; then the row and the checkout lock last
      exitWith(0, { event: 'released', epoch: owner.registration.epoch });
    } catch (error) {
      // A lost lease, a busy registry, …: the library wrote nothing it could
      // not prove was ours, and the fences that remain keep the workspace
      // closed until an operator runs `leasehold status` / `leasehold recover`.
      await closeServer(server);
      console.error(`example-daemon: release failed: ${(error as Error).message}`);
      exitWith(1, { event: 'release-failed', code: codeOf(error) });
    }
  };
  const requestStop = (): void => {
    if (stopping) return;
    stopping = true;
    if (lease !== undefined) void stop(lease);
  };
  process.on('SIGINT', requestStop);
  process.on('SIGTERM', requestStop);

  try {
    const root = resolveWorkspace(options.workspace);
    const coordination = new ServiceCoordination(
      root,
      options.stateHome === undefined ? {} : { stateHome: options.stateHome },
    );
    lease = await coordination.acquire(CONFIG, `http://127.0.0.1:${port}`, (workspace) =>
      // Called only for a workspace that had no service state yet.
      workspace.writeHostConfig(POLICY_BYTES),
    );
  } catch (error) {
    if (!ContractError.is(error)) throw error;
    // conflict: another owner (or another config); quarantine: a crashed
    // owner's registration awaits recovery; refused: broken state. Messages
    // name files, never secrets.
    console.error(`example-daemon: not the owner: ${error.message}`);
    await closeServer(server);
    return exitWith(1, { event: 'refused', code: error.code });
  }
  if (stopping) return stop(lease);

  // The self-fence. If anyone changes our files (an operator's `recover`, a
  // restore from backup, another host sharing the state home), we are no
  // longer provably the owner: stop serving at once and touch nothing — the
  // files are no longer ours to clean up. Between two checks (`watchMs`) a
  // request can still be answered; the files alone cannot close that gap.
  const lost = (error: unknown): void => {
    stopping = true; // a later signal must not try to release files that are not ours
    serving = undefined;
    server.close();
    server.closeAllConnections();
    console.error(`example-daemon: lost the lease: ${(error as Error).message}`);
    exitWith(2, { event: 'lost', code: codeOf(error) });
  };

  // The capability comes from the file this process just created; `localAccess`
  // asserts the lease before it reads it.
  let access: { endpoint: string; epoch: string; capability: string };
  try {
    access = lease.localAccess();
  } catch (error) {
    return lost(error);
  }
  serving = {
    host: `127.0.0.1:${port}`,
    epoch: access.epoch,
    authorization: Buffer.from(`Bearer ${access.capability}`),
  };
  lease.watch(options.watchMs, lost);

  emit({ event: 'ready', endpoint: access.endpoint, epoch: access.epoch, pid: process.pid });
}

await main();
