import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ContractError,
  DOCUMENT_BYTES,
  PATHS_DOCUMENT_BYTES,
  REGISTRY_BYTES,
  checkoutLockSchema,
  decodeBytes,
  localCapabilitySchema,
  ownerConfigSchema,
  ownerLockSchema,
  registrationSchema,
  registryFormatSchema,
  registryLockSchema,
  registrySchema,
  serviceFormatSchema,
  type OwnerConfig,
} from '@leasehold/contracts';

/** The folder of the child-process scripts; they import the built packages by name. */
export const PROCESS_FIXTURES = fileURLToPath(new URL('./process-fixtures/', import.meta.url));

const temporaryFolders: string[] = [];
const children: SpawnedChild[] = [];

/** SHA-256 hex, computed here with node:crypto, independently of the packages under test. */
export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The one config every process test uses: any port on 127.0.0.1. */
export const OWNER_CONFIG: OwnerConfig = {
  schema: 'leasehold.owner-config/1',
  endpoint: 'http://127.0.0.1:0',
  policyIdentity: sha256Hex('leasehold process tests: policy'),
};

/** A concrete bound endpoint; nothing listens on it, it only has to be distinct per owner. */
export function endpointOf(port: number): string {
  return `http://127.0.0.1:${port}`;
}

/** A test's temp folder (resolved, 0700) and its state home `<base>/state`, which is not created. */
export interface TestPlace {
  readonly base: string;
  readonly stateHome: string;
}

/** A fresh temp folder under the system temp folder, removed by `cleanUp`. */
export function makePlace(): TestPlace {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'leasehold-process-')));
  chmodSync(base, 0o700);
  temporaryFolders.push(base);
  return { base, stateHome: join(base, 'state') };
}

/** A real workspace folder `<base>/workspaces/<name>`, resolved (the form `resolveWorkspace` gives). */
export function makeWorkspace(place: TestPlace, name: string): string {
  const folder = join(place.base, 'workspaces', name);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  return realpathSync(folder);
}

/** How a child process ended. */
export interface ChildEnd {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderr: string;
}

/** A running fixture: its stdout lines as they come, a way to write to its stdin, and its end. */
export interface SpawnedChild {
  readonly process: ChildProcessWithoutNullStreams;
  readonly pid: number;
  readonly lines: readonly string[];
  /** Resolves once the child has exited (and was reaped) and its output is closed. */
  readonly closed: Promise<ChildEnd>;
  /** The first stdout line (seen or to come) that `matches`; rejects if the child ends first. */
  line(matches: (line: string) => boolean): Promise<string>;
  /** Writes one line to the child's stdin. */
  send(line: string): void;
}

/**
 * Spawns `node <fixture> '<plan as JSON>'` with piped stdio. `cleanUp` kills
 * it (SIGKILL) and waits for it if it is still running when the test ends.
 */
export function spawnFixture(fixture: string, plan: unknown): SpawnedChild {
  const child = spawn(process.execPath, [join(PROCESS_FIXTURES, fixture), JSON.stringify(plan)], { stdio: 'pipe' });
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
  // A child that is already gone must not fail the parent when it is written to.
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
    send(line) {
      child.stdin.write(`${line}\n`);
    },
  };
  children.push(spawned);
  return spawned;
}

/** Whether a stdout line is a JSON object with `key`. */
export function isMessage(key: string): (line: string) => boolean {
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

/** Kills every child still running (SIGKILL) and waits until it is reaped, then removes every temp folder. */
export async function cleanUp(): Promise<void> {
  const running = children.splice(0);
  for (const child of running) {
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
  }
  await Promise.all(running.map((child) => child.closed));
  for (const folder of temporaryFolders.splice(0)) rmSync(folder, { recursive: true, force: true });
}

/** The ContractError code of a failed promise, or 'no error'; any other error is rethrown. */
export async function codeOfAsync(action: Promise<unknown>): Promise<string> {
  try {
    await action;
  } catch (error) {
    if (ContractError.is(error)) return error.code;
    throw error;
  }
  return 'no error';
}

/** Counts of each value, for the record. */
export function countsOf(values: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

/** The files of one workspace in one state home, computed here from SPEC 5.1, not by the package. */
export interface HandPlaces {
  readonly namespace: string;
  readonly staging: string;
  readonly registryLock: string;
  readonly roots: string;
  readonly privateRoot: string;
  readonly privateRootName: string;
  readonly checkoutLock: string;
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
    registryLock: join(namespace, 'registry', 'registry.lock'),
    roots: join(namespace, 'registry', 'roots.json'),
    privateRoot,
    privateRootName,
    checkoutLock: join(privateRoot, 'checkout.lock'),
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
function jsonOf(path: string): unknown {
  if (!pathExists(path)) return undefined;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as unknown;
  } catch {
    return 'unreadable';
  }
}

/**
 * The service fences of `root` (SPEC 8) that remain, found with node:fs and
 * JSON.parse alone: a registry lock, a registry row for the root,
 * `owner.lock`, the capability, a registration that is not `stopped`. A file
 * that does not parse counts as a fence (it cannot be proven not to be one).
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

/** Whether the workspace's `checkout.lock` exists (by hand). */
export function checkoutLockExists(stateHome: string, root: string): boolean {
  return pathExists(handPlaces(stateHome, root).checkoutLock);
}

/** The names in the namespace's staging folder (by hand); empty when it does not exist. */
export function stagingLeftovers(stateHome: string): string[] {
  const staging = handPlaces(stateHome, '/').staging;
  return pathExists(staging) ? readdirSync(staging).sort() : [];
}

/** One entry of a state listing: a folder, or a file with its bytes, inode and mtime. */
export type ListedEntry = { readonly kind: 'folder' } | { readonly kind: 'file'; readonly ino: string; readonly mtimeNs: string; readonly bytes: string };

/**
 * Every folder and file below the state home (relative names), except what is
 * in the staging folder (which every registry transaction sweeps of dead
 * writers' leftovers): files with bytes, inode and mtime. The link count and
 * ctime are left out on purpose, since sweeping a dead writer's second link of
 * a published file changes them and nothing else.
 */
export function stateListing(stateHome: string): Record<string, ListedEntry> {
  const listing: Record<string, ListedEntry> = {};
  if (!pathExists(stateHome)) return listing;
  const staging = handPlaces(stateHome, '/').staging;
  const visit = (path: string, relative: string): void => {
    for (const name of readdirSync(path).sort()) {
      const child = join(path, name);
      if (child === staging) continue;
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

// Relative path below the namespace -> schema and bound of the document that lives there.
const DOCUMENTS: readonly { readonly pattern: RegExp; readonly schema: Parameters<typeof decodeBytes>[0]; readonly maxBytes: number }[] = [
  { pattern: /^registry\/format\.json$/, schema: registryFormatSchema, maxBytes: DOCUMENT_BYTES },
  { pattern: /^registry\/roots\.json$/, schema: registrySchema, maxBytes: REGISTRY_BYTES },
  { pattern: /^registry\/registry\.lock$/, schema: registryLockSchema, maxBytes: DOCUMENT_BYTES },
  { pattern: /^workspaces\/[0-9a-f]{32}\/checkout\.lock$/, schema: checkoutLockSchema, maxBytes: DOCUMENT_BYTES },
  { pattern: /^workspaces\/[0-9a-f]{32}\/service\/format\.json$/, schema: serviceFormatSchema, maxBytes: PATHS_DOCUMENT_BYTES },
  { pattern: /^workspaces\/[0-9a-f]{32}\/service\/config\.json$/, schema: ownerConfigSchema, maxBytes: DOCUMENT_BYTES },
  { pattern: /^workspaces\/[0-9a-f]{32}\/service\/registration\.json$/, schema: registrationSchema, maxBytes: PATHS_DOCUMENT_BYTES },
  { pattern: /^workspaces\/[0-9a-f]{32}\/service\/owner\.lock$/, schema: ownerLockSchema, maxBytes: DOCUMENT_BYTES },
  { pattern: /^workspaces\/[0-9a-f]{32}\/service\/local-capability\.json$/, schema: localCapabilitySchema, maxBytes: DOCUMENT_BYTES },
];

/**
 * Every file below the state home (outside the staging folder) that does not
 * decode strictly with the contracts schema of its place, or that has no
 * place at all: `<relative path>: <why>`. Empty when every file decodes.
 */
export function undecodableFiles(stateHome: string): string[] {
  const problems: string[] = [];
  const namespace = handPlaces(stateHome, '/').namespace;
  for (const [relative, entry] of Object.entries(stateListing(stateHome))) {
    if (entry.kind === 'folder') continue;
    const inNamespace = relative.startsWith('v1/') ? relative.slice(3) : undefined;
    const document = DOCUMENTS.find((candidate) => inNamespace !== undefined && candidate.pattern.test(inNamespace));
    if (document === undefined) {
      problems.push(`${relative}: not a Leasehold file`);
      continue;
    }
    try {
      decodeBytes(document.schema, readFileSync(join(namespace, inNamespace!)), document.maxBytes, relative);
    } catch (error) {
      problems.push(`${relative}: ${ContractError.is(error) ? error.code : 'unreadable'}`);
    }
  }
  return problems;
}
