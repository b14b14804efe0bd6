import { isMessage, spawnChild, type SpawnedChild } from '@leasehold/test-utils';
import { fileURLToPath } from 'node:url';
import { connect, type EtcdClient } from '../src/etcd-client.js';
import { EtcdOwnership } from '../src/index.js';

/** The built entry point, as the owner fixture imports it (what would be published). */
const BUILT = new URL('../dist/index.js', import.meta.url).href;
const OWNER_FIXTURE = fileURLToPath(new URL('./fixtures/owner.mjs', import.meta.url));

/** The plan of fixtures/owner.mjs. */
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

const opened: { close(): void }[] = [];

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

export function closeAll(): void {
  for (const one of opened.splice(0)) one.close();
}

export function spawnOwner(plan: OwnerPlan): SpawnedChild {
  return spawnChild(OWNER_FIXTURE, [JSON.stringify({ ...plan, module: BUILT })]);
}

/** The first of these messages the child prints, as `[key, value]`. */
export async function outcomeOf(child: SpawnedChild, keys: readonly string[]): Promise<[string, Record<string, unknown>]> {
  const line = await child.line((candidate) => keys.some((key) => isMessage(key)(candidate)));
  const message = JSON.parse(line) as Record<string, Record<string, unknown>>;
  const key = keys.find((candidate) => candidate in message) ?? '';
  return [key, message[key] ?? {}];
}

/** Starts every owner, waits until each is ready, then lets them race; answers each one's outcome. */
export async function race(plans: readonly OwnerPlan[]): Promise<{ child: SpawnedChild; outcome: string; detail: Record<string, unknown> }[]> {
  const children = plans.map((plan) => spawnOwner({ ...plan, waitForGo: true }));
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

