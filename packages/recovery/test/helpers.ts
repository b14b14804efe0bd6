import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ContractError, type OwnerConfig } from '@leasehold/contracts';
import { ServiceCoordination } from '@leasehold/coordination';

/** The folder of the child-process scripts; they import the built packages by name. */
export const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

const temporaryFolders: string[] = [];
const children: SpawnedChild[] = [];

/** SHA-256 hex, computed here with node:crypto, independently of the packages under test. */
export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The one config every test uses: any port on 127.0.0.1. */
export const OWNER_CONFIG: OwnerConfig = {
  schema: 'leasehold.owner-config/1',
  endpoint: 'http://127.0.0.1:0',
  policyIdentity: sha256Hex('leasehold recovery tests: policy'),
};

/** A concrete bound endpoint; nothing listens on it, it only has to be distinct per owner. */
export function endpointOf(port: number): string {
  return `http://127.0.0.1:${port}`;
}

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
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'leasehold-recovery-')));
  chmodSync(base, 0o700);
  temporaryFolders.push(base);
  const scratch = join(base, 'scratch');
  mkdirSync(scratch, { mode: 0o700 });
  return { base, stateHome: join(base, 'state'), scratch };
}

/** A real workspace folder `<base>/workspaces/<name>`, resolved (the form `resolveWorkspace` gives). */
export function makeWorkspace(place: TestPlace, name: string): string {
  const folder = join(place.base, 'workspaces', name);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  return realpathSync(folder);
}

/** The coordination the test process uses for `root` (no hooks; a short lock wait, since a live holder is never waited for). */
export function coordinationOf(place: TestPlace, root: string): ServiceCoordination {
  return new ServiceCoordination(root, { stateHome: place.stateHome, lockWaitMs: 200 });
}

/** How a child process ended. */
export interface ChildEnd {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderr: string;
}

/** A running fixture: its stdout lines as they come, and its end. */
export interface SpawnedChild {
  readonly process: ChildProcessWithoutNullStreams;
  readonly pid: number;
  readonly lines: readonly string[];
  /** Resolves once the child has exited (and was reaped) and its output is closed. */
  readonly closed: Promise<ChildEnd>;
  /** The first stdout line (seen or to come) that `matches`; rejects if the child ends first. */
  line(matches: (line: string) => boolean): Promise<string>;
}

/**
 * Spawns `node <fixture> '<plan as JSON>'` with piped stdio. `cleanUp` kills
 * it (SIGKILL) and waits for it if it is still running when the test ends.
 */
export function spawnFixture(fixture: string, plan: unknown): SpawnedChild {
  const child = spawn(process.execPath, [join(FIXTURES, fixture), JSON.stringify(plan)], { stdio: 'pipe' });
  const lines: string[] = [];
  const waiters: { matches: (line: string) => boolean; resolve: (line: string) => void }[] = [];
  let pending = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    pending += chunk;
    for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n')) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + 1);
      lines.push(line);
      for (const waiter of waiters.filter((candidate) => candidate.matches(line))) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
    }
  });
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });
  child.stdin.on('error', () => {});
  const closed = new Promise<ChildEnd>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal, stderr }));
  });
  if (child.pid === undefined) throw new Error(`could not spawn ${fixture}`);
  const spawned: SpawnedChild = {
    process: child,
    pid: child.pid,
    lines,
    closed,
    line(matches) {
      const seen = lines.find(matches);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise<string>((resolve, reject) => {
        waiters.push({ matches, resolve });
        void closed.then((end) => {
          const late = lines.find(matches);
          if (late !== undefined) resolve(late);
          else reject(new Error(`${fixture} ended (${end.code ?? end.signal}) before the line came: ${end.stderr}`));
        });
      });
    },
  };
  children.push(spawned);
  return spawned;
}

/** Whether a stdout line is a JSON object with `key`. */
function isMessage(key: string): (line: string) => boolean {
  return (line) => {
    try {
      const message = JSON.parse(line) as unknown;
      return typeof message === 'object' && message !== null && key in message;
    } catch {
      return false;
    }
  };
}

/** The first JSON message of a child that has `key` (waiting for it). */
export async function messageOf(child: SpawnedChild, key: string): Promise<Record<string, unknown>> {
  return JSON.parse(await child.line(isMessage(key))) as Record<string, unknown>;
}

/** Every JSON message a child printed that has `key`. */
export function messagesOf(child: SpawnedChild, key: string): Record<string, unknown>[] {
  return child.lines.filter(isMessage(key)).map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Kills the child with SIGKILL (kill -9) and waits until it is reaped. */
export async function killHard(child: SpawnedChild): Promise<ChildEnd> {
  child.process.kill('SIGKILL');
  return child.closed;
}

/** Kills every child still running (SIGKILL) and waits until it is reaped, then removes every temp folder. */
export async function cleanUp(): Promise<void> {
  const running = children.splice(0);
  for (const child of running) {
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
  }
  await Promise.all(running.map((child) => child.closed));
  for (const folder of temporaryFolders.splice(0)) rmSync(folder, { recursive: true, force: true });
}

/** The ContractError code `action` throws, or 'no error'; any other error is rethrown. */
export function codeOf(action: () => unknown): string {
  try {
    action();
  } catch (error) {
    if (ContractError.is(error)) return error.code;
    throw error;
  }
  return 'no error';
}

/** The ContractError code a promise rejects with, or 'no error'; any other error is rethrown. */
export async function codeOfAsync(action: Promise<unknown>): Promise<string> {
  try {
    await action;
  } catch (error) {
    if (ContractError.is(error)) return error.code;
    throw error;
  }
  return 'no error';
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

/** Counts of each value, for the record. */
export function countsOf(values: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

// ---- Files by hand (node:fs only, from SPEC 5.1), independent of the packages under test. ----

/** The files of one workspace in one state home, computed here from SPEC 5.1. */
export interface HandPlaces {
  readonly namespace: string;
  readonly staging: string;
  readonly journal: string;
  readonly registryLock: string;
  readonly registryFormat: string;
  readonly roots: string;
  readonly privateRoot: string;
  readonly privateRootName: string;
  readonly checkoutLock: string;
  readonly service: string;
  readonly format: string;
  readonly config: string;
  readonly registration: string;
  readonly ownerLock: string;
  readonly capability: string;
}

/** Where SPEC 5.1 puts a workspace's files. */
export function handPlaces(stateHome: string, root: string): HandPlaces {
  const namespace = join(stateHome, 'v1');
  const privateRootName = sha256Hex(root).slice(0, 32);
  const privateRoot = join(namespace, 'workspaces', privateRootName);
  const service = join(privateRoot, 'service');
  return {
    namespace,
    staging: join(namespace, '.staging'),
    journal: join(namespace, 'journal'),
    registryLock: join(namespace, 'registry', 'registry.lock'),
    registryFormat: join(namespace, 'registry', 'format.json'),
    roots: join(namespace, 'registry', 'roots.json'),
    privateRoot,
    privateRootName,
    checkoutLock: join(privateRoot, 'checkout.lock'),
    service,
    format: join(service, 'format.json'),
    config: join(service, 'config.json'),
    registration: join(service, 'registration.json'),
    ownerLock: join(service, 'owner.lock'),
    capability: join(service, 'local-capability.json'),
  };
}

/** Whether anything is at `path` (lstat, no link followed). */
export function pathExists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch (error) {
    if (typeof error === 'object' && error !== null && 'code' in error && error.code === 'ENOENT') return false;
    throw error;
  }
}

/** The parsed JSON of a file read by hand; undefined when it does not exist; 'unreadable' when it does not parse. */
export function jsonOf(path: string): unknown {
  if (!pathExists(path)) return undefined;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as unknown;
  } catch {
    return 'unreadable';
  }
}

/** The registry rows (by hand), empty when there is no `roots.json`. */
export function rowsOf(stateHome: string): { root: string; [key: string]: unknown }[] {
  const roots = jsonOf(handPlaces(stateHome, '/').roots) as { entries?: { root: string }[] } | undefined;
  return roots?.entries ?? [];
}

/**
 * The service fences of `root` (SPEC 8) that remain, found with node:fs and
 * JSON.parse alone: a registry lock, a registry row for the root,
 * `owner.lock`, the capability, a registration that is not `stopped`. A file
 * that does not parse counts as a fence.
 */
export function serviceFences(stateHome: string, root: string): string[] {
  const places = handPlaces(stateHome, root);
  const fences: string[] = [];
  if (pathExists(places.registryLock)) fences.push('registry.lock');
  const roots = jsonOf(places.roots) as { entries?: { root?: unknown }[] } | 'unreadable' | undefined;
  if (roots === 'unreadable') fences.push('roots.json (unreadable)');
  else if (roots?.entries?.some((entry) => entry.root === root) === true) fences.push('registry row');
  if (pathExists(places.ownerLock)) fences.push('owner.lock');
  if (pathExists(places.capability)) fences.push('local-capability.json');
  const registration = jsonOf(places.registration) as { phase?: unknown } | 'unreadable' | undefined;
  if (registration === 'unreadable') fences.push('registration.json (unreadable)');
  else if (registration !== undefined && registration.phase !== 'stopped') fences.push(`registration (${String(registration.phase)})`);
  return fences;
}

/** The capability string of a workspace, read by hand from `local-capability.json`. */
export function capabilityOf(stateHome: string, root: string): string {
  const document = jsonOf(handPlaces(stateHome, root).capability) as { capability?: unknown } | undefined;
  if (typeof document?.capability !== 'string') throw new Error('no capability file');
  return document.capability;
}

/** The journal records (by hand): file names, sorted; empty when there is no journal folder. */
export function journalRecords(stateHome: string): string[] {
  const journal = handPlaces(stateHome, '/').journal;
  return pathExists(journal) ? readdirSync(journal).sort() : [];
}

/**
 * Replaces the file at `path` by a new file (a new inode, mode 0600) holding
 * `bytes`, published with a rename from the scratch folder: a new
 * incarnation, as a careless editor or a restore from backup would leave.
 */
export function rewriteByHand(place: TestPlace, path: string, bytes: Uint8Array): void {
  const copy = join(place.scratch, `rewrite-${sha256Hex(path).slice(0, 16)}`);
  writeFileSync(copy, bytes, { mode: 0o600, flag: 'wx' });
  renameSync(copy, path);
}

/** Writes a new file at `path` by hand (exclusive, mode 0600). */
export function writeByHand(path: string, bytes: Uint8Array | string): void {
  writeFileSync(path, bytes, { mode: 0o600, flag: 'wx' });
}

/** One entry of a state listing: a folder, or a file with its bytes, inode and mtime. */
export type ListedEntry =
  | { readonly kind: 'folder' }
  | { readonly kind: 'file'; readonly ino: string; readonly mtimeNs: string; readonly bytes: string };

/**
 * Every folder and file below the state home, staging and journal included
 * (relative names): files with bytes (hex), inode and mtime. Folder times are
 * left out, since a lock taken and put back touches its folder's mtime and
 * nothing else.
 */
export function stateListing(stateHome: string): Record<string, ListedEntry> {
  const listing: Record<string, ListedEntry> = {};
  if (!pathExists(stateHome)) return listing;
  const visit = (path: string, relative: string): void => {
    for (const name of readdirSync(path).sort()) {
      const child = join(path, name);
      const shown = relative === '' ? name : `${relative}/${name}`;
      const stats = lstatSync(child, { bigint: true });
      if (stats.isDirectory()) {
        listing[shown] = { kind: 'folder' };
        visit(child, shown);
      } else {
        listing[shown] = { kind: 'file', ino: String(stats.ino), mtimeNs: String(stats.mtimeNs), bytes: readFileSync(child).toString('hex') };
      }
    }
  };
  visit(stateHome, '');
  return listing;
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
  const end = await killHard(child);
  if (end.signal !== 'SIGKILL') throw new Error(`the owner ended with ${end.code ?? end.signal}: ${end.stderr}`);
  return { pid: child.pid, capability };
}

/** A live owner: a child that acquired `root` and holds it until the test ends. */
export async function liveOwner(place: TestPlace, root: string): Promise<SpawnedChild> {
  const child = spawnFixture('owner.mjs', ownerPlan(place, root, 'acquire', 'hold'));
  await messageOf(child, 'held');
  return child;
}

/** A step as a fixture printed it, shown relative to the test folder, with `<ws>`, `<temp>`, `<folder>` and `<record>`. */
export function shownStep(message: Record<string, unknown>, place: TestPlace, root: string): string {
  const step = message.step as { operation: string; action: string; path: string };
  let path = step.path === place.base ? '<base>' : step.path.slice(place.base.length + 1);
  path = path.replace(handPlaces(place.stateHome, root).privateRootName, '<ws>');
  path = path
    .replace(/\.staging\/[^/]+\.tmp$/, '.staging/<temp>')
    .replace(/\.staging\/[^/]+\.dir(\/|$)/, '.staging/<folder>$1')
    .replace(/journal\/[^/]+\.json$/, 'journal/<record>');
  return `${step.operation} ${step.action} ${path}`;
}
