import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { Backend, OwnerConfig } from '@leasehold/contracts';
import type { EtcdBackend } from '@leasehold/etcd';
import {
  bytesOf,
  isMessage,
  makeTemporaryFolder,
  sha256Hex,
  spawnPlanned,
  type EtcdCluster,
  type SpawnedChild,
} from '@leasehold/test-utils';
import { openStateHome, recordBackend, type OpenBackend } from '../src/index.js';

// Two hosts sharing one etcd, as the etcd backend's tests make them: two state homes on this machine,
// each with its own private files and its own `host` identity (`LEASEHOLD_HOST`), and the workspace
// root the same string on both, as on hosts that share it.

export const CONFIG: OwnerConfig = {
  schema: 'leasehold.owner-config/1',
  endpoint: 'http://127.0.0.1:0',
  policyIdentity: sha256Hex(bytesOf('{"policy":"p"}')),
};
/** One port, bound on both hosts: endpoints are scoped per host. No socket needs to listen on it. */
export const BOUND = 'http://127.0.0.1:40001';
/** A short lease, so that a killed owner's lease ends within the test. */
const TTL_SECONDS = 2;

const opened: OpenBackend[] = [];

/** Closes every backend `hostOf` opened (after each test). */
export async function closeHosts(): Promise<void> {
  await Promise.all(opened.splice(0).map((backend) => backend.close()));
}

let prefixes = 0;

/** A state home of its own, named for the etcd prefix it shares with the other host. */
export interface Place {
  readonly base: string;
  readonly prefix: string;
  readonly backend: Backend;
}

/** A fresh place on `cluster`: a temp folder for each host's state home, and an etcd prefix of its own. */
export function placeOn(cluster: EtcdCluster): Place {
  prefixes += 1;
  const prefix = `/leasehold/state-home-test-${process.pid}-${prefixes}`;
  return {
    base: makeTemporaryFolder('etcd-backend-'),
    prefix,
    backend: { kind: 'etcd', endpoints: [...cluster.endpoints], prefix },
  };
}

/** The state home of host `host` under the place. */
export function stateHomeOf(place: Place, host: string): string {
  return join(place.base, `state-${host}`);
}

/**
 * The etcd backend of `host`, over that host's own file backend, opened as a state home that records
 * etcd is (only `LEASEHOLD_HOST` in its environment: no credentials); closed by `closeHosts`.
 */
export async function hostOf(place: Place, host: string): Promise<EtcdBackend> {
  const options = { env: { LEASEHOLD_HOST: host }, ttlSeconds: TTL_SECONDS };
  await recordBackend(stateHomeOf(place, host), place.backend, options);
  const backend = await openStateHome(stateHomeOf(place, host), options);
  opened.push(backend);
  expect(backend).toMatchObject({ stateHome: stateHomeOf(place, host), backend: place.backend, host });
  // On etcd one object is both seams: the etcd package's backend, whose leases carry their sequencer.
  expect(backend.recovery).toBe(backend.ownership);
  return backend.ownership as EtcdBackend;
}

/** Another state home of `host` on the same place, opened like `hostOf` and closed by `closeHosts`. */
export async function openElsewhere(place: Place, host: string, name: string): Promise<OpenBackend> {
  const [stateHome, options] = [join(place.base, name), { env: { LEASEHOLD_HOST: host }, ttlSeconds: TTL_SECONDS }];
  await recordBackend(stateHome, place.backend, options);
  const backend = await openStateHome(stateHome, options);
  opened.push(backend);
  return backend;
}

/**
 * An owner on host `host` in its own process, through this built package: it acquires (waiting up
 * to `plan.waitMs` when given, and printing `{"waiting":{ahead,holder}}` when its wait is first
 * told), prints `{"acquired":{epoch}}`, and on the line `release` releases, prints
 * `{"released":true}` and exits 0. A refusal prints `{"refused":code,"message"}` and exits 3.
 */
const OWNER_SCRIPT = `
import { writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
const plan = JSON.parse(process.argv[2]);
const say = (message) => writeSync(1, JSON.stringify(message) + '\\n');
const { openStateHome, recordBackend } = await import(plan.modules['@leasehold/state-home']);
const options = { env: { LEASEHOLD_HOST: plan.host }, ttlSeconds: plan.ttlSeconds };
await recordBackend(plan.stateHome, plan.backend, options);
const { ownership } = await openStateHome(plan.stateHome, options);
let told = false;
let lease;
try {
  lease = await ownership.acquire(plan.root, plan.config, {
    boundEndpoint: plan.endpoint,
    ...(plan.waitMs === undefined ? {} : { waitMs: plan.waitMs }),
    onWait: ({ ahead, holder }) => {
      if (!told) say({ waiting: { ahead, holder: holder ?? null } });
      told = true;
    },
  });
} catch (error) {
  say({ refused: error.code ?? 'error', message: error.message });
  process.exit(3);
}
say({ acquired: { epoch: lease.owner.epoch } });
for await (const line of createInterface({ input: process.stdin })) {
  if (line !== 'release') continue;
  await lease.release();
  await ownership.close();
  say({ released: true });
  process.exit(0);
}
`;

/** Spawns an owner of `root` on host `host` (waiting up to `waitMs` when given): the child, not yet acquired. */
export function spawnAcquirer(place: Place, host: string, root: string, waitMs?: number): SpawnedChild {
  const folder = makeTemporaryFolder('etcd-backend-owner-');
  writeFileSync(join(folder, 'owner.mjs'), OWNER_SCRIPT);
  const plan = {
    backend: place.backend,
    host,
    stateHome: stateHomeOf(place, host),
    ttlSeconds: TTL_SECONDS,
    root,
    config: CONFIG,
    endpoint: BOUND,
    ...(waitMs === undefined ? {} : { waitMs }),
  };
  return spawnPlanned(folder, 'owner.mjs', plan, {
    '@leasehold/state-home': import.meta.resolve('@leasehold/state-home'),
  });
}

/** Spawns an owner of `root` on host `host` and waits until it acquired: the child, and its epoch. */
export async function spawnOwner(
  place: Place,
  host: string,
  root: string,
): Promise<{ child: SpawnedChild; epoch: string }> {
  const child = spawnAcquirer(place, host, root);
  const line = await child.line(isMessage('acquired'));
  return { child, epoch: (JSON.parse(line) as { acquired: { epoch: string } }).acquired.epoch };
}
