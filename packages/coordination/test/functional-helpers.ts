import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ContractError, encode, type OwnerConfig, type Reservation } from '@leasehold/contracts';
import { currentProcess } from '@leasehold/private-files';
import { expect } from 'vitest';
import { ServiceCoordination, resolveWorkspace, type WorkspacePlaces } from '../src/index.js';

/** The folder of the child-process scripts; they import the built package by its name. */
export const FIXTURES = fileURLToPath(new URL('./functional-fixtures/', import.meta.url));

const temporaryFolders: string[] = [];
const children: SpawnedChild[] = [];

/** Every error `codeOf`/`codeOfAsync` caught since the last `cleanUp`, for the secrets checks. */
export const caughtErrors: unknown[] = [];

/** One test's temp folder: `tmp` (resolved, 0700) and the state home `<tmp>/state` (not created). */
export interface TestPlace {
  readonly tmp: string;
  readonly stateHome: string;
}

/** A fresh temp folder under the system temp folder, removed by `cleanUp`. */
export function makePlace(): TestPlace {
  const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'leasehold-coordination-')));
  chmodSync(tmp, 0o700);
  temporaryFolders.push(tmp);
  return { tmp, stateHome: join(tmp, 'state') };
}

/** A real workspace folder `<tmp>/workspaces/<name>` (made with its parents), passed through `resolveWorkspace`. */
export function makeWorkspace(place: TestPlace, name: string): string {
  const folder = join(place.tmp, 'workspaces', name);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  return resolveWorkspace(folder);
}

/** A coordination for a new workspace folder `name` in the place's state home. */
export function coordinationFor(place: TestPlace, name: string): ServiceCoordination {
  return new ServiceCoordination(makeWorkspace(place, name), { stateHome: place.stateHome });
}

/** Kills every child still running (SIGKILL), waits for it, then removes every temp folder. */
export async function cleanUp(): Promise<void> {
  const running = children.splice(0);
  for (const child of running) {
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
  }
  await Promise.all(running.map((child) => child.closed));
  for (const folder of temporaryFolders.splice(0)) rmSync(folder, { recursive: true, force: true });
  caughtErrors.splice(0);
}

function codeOfError(error: unknown): string {
  caughtErrors.push(error);
  if (ContractError.is(error)) return error.code;
  throw error;
}

/** The ContractError code `action` throws, or 'no error'; any other error is rethrown so it fails loudly. */
export function codeOf(action: () => unknown): string {
  try {
    action();
  } catch (error) {
    return codeOfError(error);
  }
  return 'no error';
}

/** The ContractError code `action` rejects with, or 'no error'; any other error is rethrown. */
export async function codeOfAsync(action: () => Promise<unknown>): Promise<string> {
  try {
    await action();
  } catch (error) {
    return codeOfError(error);
  }
  return 'no error';
}

/** UTF-8 bytes of a text. */
export function bytesOf(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

/** SHA-256 hex of `bytes`, computed here with node:crypto, independently of the packages. */
export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Policy bytes for a label: the content of a host-config.json. */
export function policyBytes(label = 'policy'): Uint8Array {
  return bytesOf(`{"policy":"${label}"}`);
}

/** A valid owner config for `endpoint` (any-port form allowed), naming the policy of `label`. */
export function configFor(endpoint = 'http://127.0.0.1:0', label = 'policy'): OwnerConfig {
  return { schema: 'leasehold.owner-config/1', endpoint, policyIdentity: sha256Hex(policyBytes(label)) };
}

/** The any-port config most tests use. */
export const ANY_PORT = configFor();
/** A concrete bound endpoint; no socket needs to listen on it. */
export const BOUND = 'http://127.0.0.1:40001';

/**
 * Writes `bytes` to `path` as a new inode, the way a careless hand would
 * replace a file: a 0600 file in the temp folder (outside the state home),
 * renamed over `path`. A new inode guarantees a new stamp even when the
 * bytes and the clock's granularity are the same.
 */
export function replaceFile(place: TestPlace, path: string, bytes: Uint8Array, mode = 0o600): void {
  const scratch = join(place.tmp, `scratch-${randomUUID()}`);
  writeFileSync(scratch, bytes, { mode: 0o600 });
  chmodSync(scratch, mode);
  renameSync(scratch, path);
}

/** Rewrites a JSON document canonically (contracts `encode`), after `edit` changed its parsed value. */
export function rewriteJson(place: TestPlace, path: string, edit: (value: Record<string, unknown>) => Record<string, unknown>): void {
  const value = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  replaceFile(place, path, encode(edit(value)));
}

/** The parsed JSON document at `path`. */
export function readJson(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
}

/** A valid reservation for `root` in `stateHome` (another, made-up owner). */
export function reservationFor(stateHome: string, root: string, endpoint: string): Reservation {
  const owner = currentProcess();
  return {
    root,
    stateHome,
    configIdentity: sha256Hex(root),
    endpoint,
    epoch: randomUUID(),
    pid: owner.pid,
    host: owner.host,
    ownerToken: randomUUID(),
  };
}

/** The registry paths of a state home. */
export function registryPaths(stateHome: string): { folder: string; format: string; roots: string; lock: string } {
  const folder = join(stateHome, 'v1', 'registry');
  return { folder, format: join(folder, 'format.json'), roots: join(folder, 'roots.json'), lock: join(folder, 'registry.lock') };
}

/** The reservations in roots.json, read directly. */
export function registryRows(stateHome: string): Reservation[] {
  return readJson(registryPaths(stateHome).roots).entries as Reservation[];
}

/** One entry of a tree listing. */
export interface TreeEntry {
  readonly kind: 'file' | 'folder' | 'symlink' | 'other';
  readonly mode: number;
  readonly uid: number;
  readonly ino: string;
  readonly nlink: string;
  /** Size, mtime and ctime (ns) of a file; folders leave them empty (see `treeOf`). */
  readonly size: string;
  readonly mtimeNs: string;
  readonly ctimeNs: string;
  /** Bytes of a regular file (hex), or the target of a link. */
  readonly content: string;
}

/**
 * Every name below `root` (recursively, the root itself as '.'): for a file
 * or link, its bytes (or target), inode, mode, owner, link count, size, mtime
 * and ctime. For a folder, its inode, mode, owner and link count, and (as the
 * listing) its names; not its times, since a refused registry transaction
 * still creates and removes `registry.lock` (and its staging temp) inside
 * folders, and that the lock is gone again is what the listing proves.
 */
export function treeOf(root: string): Record<string, TreeEntry> {
  const tree: Record<string, TreeEntry> = {};
  const visit = (relative: string): void => {
    const path = relative === '.' ? root : join(root, relative);
    const stats = lstatSync(path, { bigint: true });
    const kind = stats.isFile() ? 'file' : stats.isDirectory() ? 'folder' : stats.isSymbolicLink() ? 'symlink' : 'other';
    const folder = kind === 'folder';
    tree[relative] = {
      kind,
      mode: Number(stats.mode),
      uid: Number(stats.uid),
      ino: String(stats.ino),
      nlink: String(stats.nlink),
      size: folder ? '' : String(stats.size),
      mtimeNs: folder ? '' : String(stats.mtimeNs),
      ctimeNs: folder ? '' : String(stats.ctimeNs),
      content: kind === 'file' ? readFileSync(path).toString('hex') : kind === 'symlink' ? readlinkSync(path) : '',
    };
    if (folder) {
      for (const name of readdirSync(path).sort()) visit(relative === '.' ? name : join(relative, name));
    }
  };
  if (existsSync(root)) visit('.');
  return tree;
}

/** Runs `action` and asserts that nothing under `root` changed; gives the code it threw. */
export async function unchangedCodeOf(root: string, action: () => Promise<unknown>): Promise<string> {
  const before = treeOf(root);
  const code = await codeOfAsync(action);
  expect(treeOf(root)).toEqual(before);
  return code;
}

/** The mode bits of whatever is at `path`, not following a link. */
export function modeOf(path: string): number {
  return lstatSync(path).mode & 0o7777;
}

/** The capability in a workspace's local-capability.json. */
export function capabilityIn(places: WorkspacePlaces): string {
  return readJson(places.capability).capability as string;
}

/** How a child process ended. */
export interface ChildEnd {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderr: string;
}

/** A running fixture: its stdout lines as they come, and a promise of its end. */
export interface SpawnedChild {
  readonly process: ChildProcessWithoutNullStreams;
  readonly pid: number;
  /** Resolves once the child has exited (and been reaped) and its output is closed. */
  readonly closed: Promise<ChildEnd>;
  /** The first stdout line (seen or still to come) that `matches`; rejects if the child ends first. */
  line(matches: (line: string) => boolean): Promise<string>;
}

/** Spawns `node <fixture> ...args` with piped stdio; `cleanUp` kills it if it still runs. */
export function spawnFixture(fixture: string, args: readonly string[]): SpawnedChild {
  const child = spawn(process.execPath, [join(FIXTURES, fixture), ...args], { stdio: 'pipe' });
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

/** SIGKILLs a child and waits until it is reaped. */
export async function killAndReap(child: SpawnedChild): Promise<ChildEnd> {
  child.process.kill('SIGKILL');
  return child.closed;
}
