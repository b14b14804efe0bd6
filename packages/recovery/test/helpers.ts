import { writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { workspacePlaces, type OwnerConfig, type RecoveryResult, type WorkspacePlaces } from '@leasehold/contracts';
import { acquireWorkspace, inspectWorkspace, openWorkspace, type Workspace } from '@leasehold/coordination';
import type { MutationStep, PrivateFilesHooks } from '@leasehold/private-files';
import {
  codeOfAsync,
  handPlaces,
  jsonOf,
  killAndReap,
  listingOutsideStaging,
  loopbackEndpoint,
  messageOf,
  namesIn,
  pathExists,
  serviceFences,
  sha256Hex,
  spawnPlanned,
  spawnSharedFixture,
  type CrasherPlan,
  type FixtureModules,
  type ListedEntry,
  type SpawnedChild,
  type TestPlace,
} from '@leasehold/test-utils';
import { prepareRecoveryRelease, recover, recoveryView, type RecoveryGrant } from '../src/recover.js';
import type { FileRecoveryView } from '../src/recovery-state.js';

/** The folder of the child-process scripts; they import the built packages by name. */
export const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

/** What the shared fixtures of @leasehold/test-utils load: the built coordination, resolved here (test-utils may not depend on it). */
export const FIXTURE_MODULES: FixtureModules = {
  '@leasehold/coordination': import.meta.resolve('@leasehold/coordination'),
};

/** The one config every test uses: any port on 127.0.0.1. */
export const OWNER_CONFIG: OwnerConfig = {
  schema: 'leasehold.owner-config/1',
  endpoint: 'http://127.0.0.1:0',
  policyIdentity: sha256Hex('leasehold recovery tests: policy'),
};

/** The endpoint of owners that die in children. */
export const CHILD_ENDPOINT = loopbackEndpoint(45_001);
/** The endpoint of the owner the test process acquires after a recovery. */
export const PARENT_ENDPOINT = loopbackEndpoint(45_002);

/** Grants authority. */
const grant = (): void => {};

/** The coordination the test process uses for `root` (no hooks; a short lock wait, since a live holder is never waited for). */
export function coordinationOf(place: TestPlace, root: string): Workspace {
  return openWorkspace(root, { stateHome: place.stateHome, lockWaitMs: 200 });
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

// ---- Files by hand (node:fs only, from docs/layout.md), independent of the packages under test. ----

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

/** The plan of an owner child: the shared crasher fixture of @leasehold/test-utils (see its header). */
export type OwnerPlan = CrasherPlan;

/** One owner run of owners.mjs: its workspace and the steps that fail with EIO. */
interface OwnerRun {
  readonly workspace: string;
  readonly stateHome: string;
  readonly endpoint: string;
  /** The counted step (from 1) that fails. */
  readonly failAt?: number;
  /** Every step exactly like one of these fails. */
  readonly failOn?: readonly MutationStep[];
}

export interface OwnersPlan {
  readonly operation: OwnerPlan['operation'];
  readonly config: OwnerConfig;
  readonly runs: readonly OwnerRun[];
  /** How the process ends after the last run. */
  readonly end: 'exit' | 'kill';
}

/** What owners.mjs or a batch of recoverer.mjs reported for one run. */
export interface RunReport {
  readonly run: number;
  /** The code (or errno code) the operation failed with; null when it still succeeded. */
  readonly failed: string | null;
  readonly steps: number;
  /** The step that failed first, as `shownStep` takes it. */
  readonly step: MutationStep | null;
}

export interface RecovererPlan {
  readonly workspace: string;
  readonly stateHome: string;
  readonly digest: string;
  readonly killAt?: number;
}

/** A batch of recoverer.mjs: one recovery per run, each failing with EIO at its own step. */
export interface RecoverersPlan {
  readonly runs: readonly {
    readonly workspace: string;
    readonly stateHome: string;
    readonly digest: string;
    readonly failAt: number;
  }[];
}

/**
 * Runs a batch fixture (owners.mjs, or recoverer.mjs with runs) to its end
 * and answers its reports, one per run, in order; the process ended as
 * `expected` says.
 */
export async function runBatch(
  fixture: string,
  plan: OwnersPlan | RecoverersPlan,
  expected: 'exit' | 'kill' = 'exit',
): Promise<RunReport[]> {
  const child = spawnPlanned(FIXTURES, fixture, plan);
  const end = await child.closed;
  expect(end, end.stderr).toMatchObject(
    expected === 'exit' ? { code: 0, signal: null } : { code: null, signal: 'SIGKILL' },
  );
  const reports = child.lines.filter((line) => line.startsWith('{"run":')).map((line) => JSON.parse(line) as RunReport);
  expect(reports.map(({ run }) => run)).toEqual(plan.runs.map((_, index) => index));
  return reports;
}

/** The plan of an owner child for `root`. */
export function ownerPlan(
  place: TestPlace,
  root: string,
  operation: OwnerPlan['operation'],
  killAt?: OwnerPlan['killAt'],
): OwnerPlan {
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
  const child = spawnSharedFixture('crasher', ownerPlan(place, root, 'acquire', 'hold'), FIXTURE_MODULES);
  await messageOf(child, 'held');
  const capability = capabilityOf(place.stateHome, root);
  const end = await killAndReap(child);
  if (end.signal !== 'SIGKILL') throw new Error(`the owner ended with ${end.code ?? end.signal}: ${end.stderr}`);
  return { pid: child.pid, capability };
}

/** A live owner: a child that acquired `root` and holds it until the test ends. */
export async function liveOwner(place: TestPlace, root: string): Promise<SpawnedChild> {
  const child = spawnSharedFixture('crasher', ownerPlan(place, root, 'acquire', 'hold'), FIXTURE_MODULES);
  await messageOf(child, 'held');
  return child;
}

// ---- Recovery as an operator runs it. ----

/** `recoveryView` of `root` in the test's state home. */
export function viewOf(place: TestPlace, root: string): FileRecoveryView {
  return recoveryView(root, { stateHome: place.stateHome });
}

/** `recover` of `root` in the test's state home with `digest`, authority granted. */
export function recoverWith(
  place: TestPlace,
  root: string,
  digest: string,
  options: { hooks?: PrivateFilesHooks } = {},
): Promise<RecoveryResult> {
  return recover(root, { stateHome: place.stateHome, expectedDigest: digest, assertAuthority: grant, ...options });
}

/** `prepareRecoveryRelease` of `root` in the test's state home. */
export function grantOf(
  place: TestPlace,
  root: string,
  digest: string,
  assertAuthority: () => void = grant,
): RecoveryGrant {
  return prepareRecoveryRelease(root, digest, assertAuthority, { stateHome: place.stateHome });
}

/**
 * Finishes with a new snapshot: its holders are absent, `recover` with its
 * digest succeeds, no service fence or checkout lock is left, `inspect` is
 * `stopped` (or `absent` when the owner died before its service folder), and a new owner acquires and releases.
 */
export async function finishRecovery(place: TestPlace, root: string, label = root): Promise<void> {
  const coordination = coordinationOf(place, root);
  const snapshot = viewOf(place, root);
  for (const { holder, verdict } of snapshot.holders) expect(verdict, `${label}: holder ${holder.pid}`).toBe('absent');
  expect(await recoverWith(place, root, snapshot.digest), label).toMatchObject({ recovered: true });
  expect(serviceFences(place.stateHome, root), label).toEqual([]);
  expect(pathExists(handPlaces(place.stateHome, root).checkoutLock), label).toBe(false);
  expect(['absent', 'stopped'], label).toContain(inspectWorkspace(coordination).status);
  await (await acquireWorkspace(coordination, OWNER_CONFIG, PARENT_ENDPOINT)).release();
  expect(inspectWorkspace(coordination).status, label).toBe('stopped');
}

// ---- What a dead writer left, judged by hand (docs/persistence.md, "Crash safety"). ----

/**
 * The code a new `acquire` must answer in this state, worked out by hand from docs/layout.md
 * ("The selected state") and docs/ownership.md ("Acquire", "Quarantine and conflict"). Every
 * process these states name is a dead writer: a row or a checkout lock in the way is a crashed
 * owner's fence, `quarantine`.
 */
function expectedAcquireCode(place: TestPlace, root: string): string {
  const places = handPlaces(place.stateHome, root);
  if (rowsOf(place.stateHome).some((row) => row.root === root)) return 'quarantine'; // a dead writer's row for this root
  const registration = jsonOf(places.registration) as { phase: string; checkoutToken: string } | undefined;
  const ownerFiles = [places.ownerLock, places.capability, places.checkoutLock].map(pathExists);
  if (registration !== undefined && registration.phase !== 'stopped')
    return ownerFiles.every(Boolean) ? 'quarantine' : 'refused';
  if (ownerFiles[0] === true || ownerFiles[1] === true) return 'refused'; // docs/layout.md, "The selected state", rule 5
  const checkout = jsonOf(places.checkoutLock) as { token: string } | undefined;
  if (checkout !== undefined) return checkout.token === registration?.checkoutToken ? 'refused' : 'quarantine';
  return 'no error';
}

/**
 * Crash safety (docs/persistence.md, "Crash safety") on a state left by a dead writer: `inspect` is never `absent` or
 * `stopped` while a service fence remains, and a new `acquire` by this
 * process is refused with the code the state calls for, changing nothing
 * outside the staging folder. The acquire is tried only when no registry lock
 * is left (its transaction would take the dead writer's lock over, which is
 * what the recovery that follows must show) and when the state calls for a
 * refusal. (Likewise with a take-over marker left, which the acquire's
 * transaction would sweep.) Returns what `inspect` answered.
 */
export async function judgeFenced(place: TestPlace, root: string, label: string): Promise<string> {
  const coordination = coordinationOf(place, root);
  const fences = serviceFences(place.stateHome, root);
  const inspected = inspectWorkspace(coordination).status;
  if (fences.length > 0)
    expect(['absent', 'stopped'], `${label}: fences ${fences.join(', ')}`).not.toContain(inspected);
  const registryFolder = dirname(handPlaces(place.stateHome, root).registryLock);
  if (namesIn(registryFolder).some((name) => name === 'registry.lock' || name.startsWith('takeover-')))
    return inspected;
  const expected = expectedAcquireCode(place, root);
  if (fences.length > 0) expect(expected, `${label}: fences ${fences.join(', ')}`).not.toBe('no error');
  if (expected === 'no error') return inspected;
  const before = listingOutsideStaging(place.stateHome);
  const code = await codeOfAsync(acquireWorkspace(coordination, OWNER_CONFIG, PARENT_ENDPOINT));
  expect(code, `${label}: acquire with fences ${fences.join(', ')}`).toBe(expected);
  expect(listingOutsideStaging(place.stateHome), `${label}: the refused acquire changed the state`).toEqual(before);
  return inspected;
}

/** Every path docs/layout.md names for `root`, from the package (to build a recovery journal). */
export function placesOf(place: TestPlace, root: string): WorkspacePlaces {
  return workspacePlaces(root, place.stateHome);
}

/** An error shaped as node:fs reports a failing disk (the fixtures throw the same). */
export function ioError(step: MutationStep): Error {
  return Object.assign(new Error(`EIO: i/o error, ${step.action} '${step.path}'`), {
    code: 'EIO',
    errno: -5,
    syscall: step.action,
    path: step.path,
  });
}
