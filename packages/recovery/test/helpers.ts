import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { OwnerConfig } from '@leasehold/contracts';
import { ServiceCoordination } from '@leasehold/coordination';
import {
  endpointOf,
  handPlaces,
  jsonOf,
  killAndReap,
  makeTemporaryFolder,
  messageOf,
  namesIn,
  sha256Hex,
  spawnChild,
  type ListedEntry,
  type SpawnedChild,
} from '@leasehold/test-utils';

/** The folder of the child-process scripts; they import the built packages by name. */
export const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

/** The one config every test uses: any port on 127.0.0.1. */
export const OWNER_CONFIG: OwnerConfig = {
  schema: 'leasehold.owner-config/1',
  endpoint: 'http://127.0.0.1:0',
  policyIdentity: sha256Hex('leasehold recovery tests: policy'),
};

/** The endpoint of owners that die in children. */
export const CHILD_ENDPOINT = endpointOf(45_001);
/** The endpoint of the owner the test process acquires after a recovery. */
export const PARENT_ENDPOINT = endpointOf(45_002);

/** Grants authority. */
export const grant = (): void => {};

/** A test's temp folder (resolved, 0700), its state home `<base>/state` (not created) and a scratch folder. */
export interface TestPlace {
  readonly base: string;
  readonly stateHome: string;
  /** A folder on the same file system, outside the state home, for files written by hand before a rename. */
  readonly scratch: string;
}

/** A fresh temp folder under the system temp folder, removed by `cleanUp`. */
export function makePlace(): TestPlace {
  const base = makeTemporaryFolder('leasehold-recovery-');
  const scratch = join(base, 'scratch');
  mkdirSync(scratch, { mode: 0o700 });
  return { base, stateHome: join(base, 'state'), scratch };
}

/** The coordination the test process uses for `root` (no hooks; a short lock wait, since a live holder is never waited for). */
export function coordinationOf(place: TestPlace, root: string): ServiceCoordination {
  return new ServiceCoordination(root, { stateHome: place.stateHome, lockWaitMs: 200 });
}

/** Spawns `node <fixture> '<plan as JSON>'` from the fixtures folder; `cleanUp` kills it if it is still running. */
export function spawnFixture(fixture: string, plan: unknown): SpawnedChild {
  return spawnChild(join(FIXTURES, fixture), [JSON.stringify(plan)]);
}

/** The error `action` throws or rejects with (the test fails when it does not). */
export async function errorOf(action: () => unknown): Promise<unknown> {
  try {
    await action();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error, none was thrown');
}

// ---- Files by hand (node:fs only, from SPEC 5.1), independent of the packages under test. ----

/** The registry rows (by hand), empty when there is no `roots.json`. */
export function rowsOf(stateHome: string): { root: string; [key: string]: unknown }[] {
  const roots = jsonOf(handPlaces(stateHome, '/').roots) as { entries?: { root: string }[] } | undefined;
  return roots?.entries ?? [];
}

/** The capability string of a workspace, read by hand from `local-capability.json`. */
export function capabilityOf(stateHome: string, root: string): string {
  const document = jsonOf(handPlaces(stateHome, root).capability) as { capability?: unknown } | undefined;
  if (typeof document?.capability !== 'string') throw new Error('no capability file');
  return document.capability;
}

/** The journal records (by hand): file names, sorted; empty when there is no journal folder. */
export function journalRecords(stateHome: string): string[] {
  return namesIn(handPlaces(stateHome, '/').journal);
}

/** Writes a new file at `path` by hand (exclusive, mode 0600). */
export function writeByHand(path: string, bytes: Uint8Array | string): void {
  writeFileSync(path, bytes, { mode: 0o600, flag: 'wx' });
}

/** The relative names whose entry differs between two listings (added, removed or changed), sorted. */
export function changedEntries(before: Record<string, ListedEntry>, after: Record<string, ListedEntry>): string[] {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...names].filter((name) => JSON.stringify(before[name]) !== JSON.stringify(after[name])).sort();
}

/** Plans the fixtures take (see the comments at the top of each). */
export interface OwnerPlan {
  readonly workspace: string;
  readonly stateHome: string;
  readonly operation: 'acquire' | 'phase' | 'release';
  readonly config: OwnerConfig;
  readonly endpoint: string;
  readonly killAt?: number | 'end' | 'hold';
}

export interface RecovererPlan {
  readonly workspace: string;
  readonly stateHome: string;
  readonly scratch: string;
  readonly digest: string;
  readonly killAt?: number;
  readonly bridgeFailsAt?: number;
  readonly tamper?: { readonly at: { operation: string; action: string; path: string }; readonly how: 'remove' | 'rewrite' };
}

/** The plan of an owner child for `root`. */
export function ownerPlan(place: TestPlace, root: string, operation: OwnerPlan['operation'], killAt?: OwnerPlan['killAt']): OwnerPlan {
  return {
    workspace: root,
    stateHome: place.stateHome,
    operation,
    config: OWNER_CONFIG,
    endpoint: CHILD_ENDPOINT,
    ...(killAt === undefined ? {} : { killAt }),
  };
}

/**
 * A dead owner: a child that acquired `root` completely (phase `idle`) and
 * was then killed with SIGKILL while idle. Returns its pid and the capability
 * read by hand while it was alive.
 */
export async function deadOwner(place: TestPlace, root: string): Promise<{ pid: number; capability: string }> {
  const child = spawnFixture('owner.mjs', ownerPlan(place, root, 'acquire', 'hold'));
  await messageOf(child, 'held');
  const capability = capabilityOf(place.stateHome, root);
  const end = await killAndReap(child);
  if (end.signal !== 'SIGKILL') throw new Error(`the owner ended with ${end.code ?? end.signal}: ${end.stderr}`);
  return { pid: child.pid, capability };
}

/** A live owner: a child that acquired `root` and holds it until the test ends. */
export async function liveOwner(place: TestPlace, root: string): Promise<SpawnedChild> {
  const child = spawnFixture('owner.mjs', ownerPlan(place, root, 'acquire', 'hold'));
  await messageOf(child, 'held');
  return child;
}
