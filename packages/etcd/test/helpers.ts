import {
  codeOfAsync,
  isMessage,
  spawnPlanned,
  type EtcdCluster,
  type FixtureModules,
  type SpawnedChild,
} from '@leasehold/test-utils';
import { ContractError } from '@leasehold/contracts';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { connect, type EtcdClient } from '../src/etcd-client.js';
import type { Sequencer } from '../src/etcd-fence.js';
import { EtcdOwnership } from '../src/ownership.js';

/**
 * The built entry point, as the owner fixture imports it (what would be published), and the built
 * module of the etcd side alone, which only this package's tests take an ownership from.
 */
const BUILT: FixtureModules = {
  '@leasehold/etcd': new URL('../dist/index.js', import.meta.url).href,
  ownership: new URL('../dist/ownership.js', import.meta.url).href,
};
/** The folder of the child-process scripts. */
const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

/** The plan of fixtures/owner.mjs, spawned with `spawnPlanned(FIXTURES, 'owner.mjs', plan, BUILT)` (`acquiredOwner`, `race`). */
export interface OwnerPlan {
  readonly endpoints: readonly string[];
  readonly prefix: string;
  readonly host: string;
  readonly root: string;
  readonly endpoint: string;
  readonly ttlSeconds?: number;
  /** Print {"ready":true} and wait for the line "go" before acquiring (to start a race together). */
  readonly waitForGo?: boolean;
}

let prefixes = 0;

/** A prefix no other test of this run uses: one state home per test. */
export function freshPrefix(): string {
  prefixes += 1;
  return `/leasehold/test-${process.pid}-${prefixes}`;
}

const opened: { close(): void | Promise<void> }[] = [];

/** An ownership for `host` on `prefix`, closed by `closeAll`. */
export function ownershipOf(endpoints: readonly string[], prefix: string, host: string): EtcdOwnership {
  const ownership = new EtcdOwnership({ endpoints, prefix, host });
  opened.push(ownership);
  return ownership;
}

/** The raw etcd client the tests read (and write around Leasehold) with, closed by `closeAll`. */
export function rawClient(endpoints: readonly string[]): EtcdClient {
  const client = connect({ endpoints, requestTimeoutMs: 5000 });
  opened.push(client);
  return client;
}

export async function closeAll(): Promise<void> {
  await Promise.all(opened.splice(0).map((one) => Promise.resolve(one.close())));
}

/** The first of these messages the child prints, as `[key, value]`. */
export async function outcomeOf(
  child: SpawnedChild,
  keys: readonly string[],
): Promise<[string, Record<string, unknown>]> {
  const line = await child.line((candidate) => keys.some((key) => isMessage(key)(candidate)));
  const message = JSON.parse(line) as Record<string, Record<string, unknown>>;
  const key = keys.find((candidate) => candidate in message) ?? '';
  return [key, message[key] ?? {}];
}

/** Spawns fixtures/owner.mjs with `plan` and waits until it holds its root: the child, and the sequencer it acquired with. */
export async function acquiredOwner(plan: OwnerPlan): Promise<{ child: SpawnedChild; sequencer: Sequencer }> {
  const child = spawnPlanned(FIXTURES, 'owner.mjs', plan, BUILT);
  const [, acquired] = await outcomeOf(child, ['acquired']);
  return { child, sequencer: acquired.sequencer as Sequencer };
}

/** Starts every owner, waits until each is ready, then lets them race; answers each one's outcome. */
export async function race(
  plans: readonly OwnerPlan[],
): Promise<{ child: SpawnedChild; outcome: string; detail: Record<string, unknown> }[]> {
  const children = plans.map((plan) =>
    spawnPlanned(FIXTURES, 'owner.mjs', { ...plan, waitForGo: true } satisfies OwnerPlan, BUILT),
  );
  await Promise.all(children.map((child) => child.line(isMessage('ready'))));
  for (const child of children) child.send('go');
  return Promise.all(
    children.map(async (child) => {
      const [outcome, detail] = await outcomeOf(child, ['acquired', 'refused']);
      return { child, outcome, detail };
    }),
  );
}

/** Releases a fixture owner and waits until it said so. */
export async function releaseOwner(child: SpawnedChild): Promise<void> {
  child.send('release');
  await child.line(isMessage('released'));
}

/** The pause between two polls of a condition. */
export function pollPause(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 50));
}

/** Waits for a condition: polls it, with no bound of its own (the test's timeout is the bound). */
export async function until(condition: () => Promise<boolean>): Promise<void> {
  while (!(await condition())) await pollPause();
}

/** The bound of one status request to a member: a frozen member never answers. */
const STATUS_TIMEOUT_MS = 1_000;

/** What one member says of itself and its leader (etcd's JSON gateway), or undefined if it did not answer. */
async function memberStatus(
  clientUrl: string,
): Promise<{ readonly member: string; readonly leader: string } | undefined> {
  try {
    const response = await fetch(`${clientUrl}/v3/maintenance/status`, {
      method: 'POST',
      body: '{}',
      signal: AbortSignal.timeout(STATUS_TIMEOUT_MS),
    });
    const status = (await response.json()) as { header?: { member_id?: string }; leader?: string };
    const member = status.header?.member_id;
    const leader = status.leader;
    return member === undefined || leader === undefined || leader === '0' ? undefined : { member, leader };
  } catch {
    return undefined;
  }
}

/** The index in `cluster.members` of the leader, once every member answers and all name the same one. */
export async function leaderIndex(cluster: EtcdCluster): Promise<number> {
  for (;;) {
    const statuses = await Promise.all(cluster.members.map(({ clientUrl }) => memberStatus(clientUrl)));
    const leaders = new Set(statuses.map((status) => status?.leader));
    const index = statuses.findIndex((status) => status !== undefined && status.member === status.leader);
    if (leaders.size === 1 && !leaders.has(undefined) && index >= 0) return index;
    await pollPause();
  }
}

/** The test's monotonic time (`performance.now()`) when the child's first `key` message reached it, and the message. Call it before the message can come. */
export async function arrivalOf(
  child: SpawnedChild,
  key: string,
): Promise<{ readonly at: number; readonly message: Record<string, unknown> }> {
  const line = await child.line(isMessage(key));
  // Taken in the same turn as the stdout chunk that carried the line: an upper bound of when the child said it.
  const at = performance.now();
  const message = (JSON.parse(line) as Record<string, Record<string, unknown>>)[key] ?? {};
  return { at, message };
}

/** A claimant acquiring `root` again and again until `stop()`, which answers every claim's code ('no error' would be a second owner). */
export function keepClaiming(ownership: EtcdOwnership, root: string, endpoint: string): { stop(): Promise<string[]> } {
  const codes: string[] = [];
  let stopped = false;
  const claims = (async () => {
    while (!stopped) {
      codes.push(await codeOfAsync(() => ownership.acquire(root, { endpoint })));
      await pollPause();
    }
  })();
  return {
    async stop() {
      stopped = true;
      await claims;
      return codes;
    },
  };
}

/** How many times each code occurs, for the printed figures. */
export function tally(codes: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const code of codes) counts[code] = (counts[code] ?? 0) + 1;
  return counts;
}

/** The answer of `request` once etcd answers it: retried while it throws `unavailable` (a member still starting, a client reconnecting). */
export async function answered<T>(request: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await request();
    } catch (error) {
      if (!ContractError.is(error, 'unavailable')) throw error;
    }
    await pollPause();
  }
}
