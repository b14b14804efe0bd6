#!/usr/bin/env node
/**
 * An example daemon: the one owner of a workspace folder, built on
 * `@leasehold/transport` exactly as a downstream service would be.
 *
 *   node dist/daemon.js [--workspace DIR] [--state-home DIR] [--watch-ms N]
 *
 * It runs on the backend its state home records (`leasehold init`): the
 * state home's files, or an etcd cluster shared by hosts.
 *
 * `serveOwner` does the whole life cycle: it binds 127.0.0.1 (any free port),
 * acquires the workspace with that endpoint, serves the owner contract
 * (`GET /v1/status`, `POST /v1/stop`, which `leasehold status` and
 * `leasehold stop` speak) beside this daemon's own `GET /hello`, re-checks its
 * files every `--watch-ms`, and on SIGINT, SIGTERM, SIGHUP or `leasehold stop` goes
 * `stopping`, drains and releases. Every request, `/hello` included, must
 * carry the right `Host` and the workspace's bearer capability.
 *
 * Standard output carries one JSON line per event, for supervisors and tests
 * (the capability never appears on it, nor on standard error):
 *
 *   {"event":"ready","endpoint":"http://127.0.0.1:PORT","epoch":"…","pid":N}
 *   {"event":"refused","code":"conflict"}       exit 1: not the owner (another owner, quarantine, …)
 *   {"event":"lost","code":"conflict"}          exit 2: our files changed under us; nothing touched
 *   {"event":"released","epoch":"…"}            exit 0: after SIGINT, SIGTERM, SIGHUP or `leasehold stop`
 *   {"event":"release-failed","code":"busy"}    exit 1: fences remain; see `leasehold status`
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ContractError, encode } from '@leasehold/contracts';
import { defaultStateHome, resolveWorkspace } from '@leasehold/coordination';
import { openStateHome, type OpenBackend } from '@leasehold/state-home';
import { serveOwner, type OwnerRoutes, type Serving } from '@leasehold/transport';

/**
 * This service's policy, published as `host-config.json` for a new workspace.
 * Its SHA-256 is the config's `policyIdentity`, so a daemon with another
 * policy cannot take over a workspace set up for this one (`conflict`).
 */
const POLICY = encode({ service: 'leasehold-example-daemon', routes: ['GET /hello'] });

/** Set once the owner has acquired and serves (no secret in it). */
let serving: Serving | undefined;

/** This daemon's own routes: reached only after the transport's Host and bearer checks. */
const routes: OwnerRoutes = (request, response) => {
  response.setHeader('content-type', 'application/json');
  if (request.method === 'GET' && request.url === '/hello') {
    response.end(JSON.stringify({ epoch: serving?.epoch, message: 'hello from the owner of this workspace' }));
  } else {
    response.writeHead(404).end(JSON.stringify({ error: 'not found' }));
  }
};

function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

let options;
try {
  options = parseArgs({
    options: {
      workspace: { type: 'string', default: process.cwd() },
      'state-home': { type: 'string' },
      // How often the self-fence re-checks the owner's files (tests use a short one).
      'watch-ms': { type: 'string', default: '1000' },
    },
  }).values;
  if (!/^[1-9][0-9]{0,6}$/.test(options['watch-ms']))
    throw new TypeError('--watch-ms: a whole number of milliseconds, from 1');
} catch (error) {
  console.error(`example-daemon: ${(error as Error).message}`);
  process.exit(64); // EX_USAGE
}

// Coordination wants an absolute, normalised state home: resolve a relative one here.
const stateHome = options['state-home'] === undefined ? undefined : resolve(options['state-home']);
// The backend the state home records (its files, or an etcd cluster shared by hosts), as `leasehold` uses it.
// The etcd client is loaded only for a state home that records etcd: on the file backend this daemon never loads it.
let backend: OpenBackend | undefined;
try {
  backend = await openStateHome(stateHome ?? defaultStateHome());
  await serveOwner(resolveWorkspace(options.workspace), {
    policy: POLICY,
    ownership: backend.ownership,
    watchIntervalMs: Number(options['watch-ms']),
    routes,
    onServing: (started) => {
      serving = started;
      emit({ event: 'ready', endpoint: started.endpoint, epoch: started.epoch, pid: started.pid });
    },
  });
  emit({ event: 'released', epoch: serving?.epoch });
} catch (error) {
  const code = ContractError.is(error) ? error.code : 'unknown';
  console.error(`example-daemon: ${(error as Error).message}`); // messages name files, never secrets
  // The fix, where the layer that refused knows it: the very words `leasehold` prints (never a secret either).
  if (ContractError.is(error) && error.remedy !== undefined) console.error(`  ${error.remedy}`);
  if (serving === undefined) {
    // Never served: another owner or config (conflict), a gone owner's fences awaiting recovery (quarantine), broken state.
    emit({ event: 'refused', code });
    process.exitCode = 1;
  } else if (serving.lease.owner.phase === 'idle') {
    // Our files changed under us (the self-fence, or found by the stop): no longer provably the owner, so nothing touched.
    emit({ event: 'lost', code });
    process.exitCode = 2;
  } else {
    // The release had begun and could not finish: the remaining fences keep the workspace closed.
    emit({ event: 'release-failed', code });
    process.exitCode = 1;
  }
} finally {
  await backend?.close();
}
