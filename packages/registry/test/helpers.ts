import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { chmodSync, lstatSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ContractError, type Reservation } from '@leasehold/contracts';
import { currentProcess } from '@leasehold/private-files';

/** The folder of the child-process scripts; they import the built package by its name. */
export const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

const temporaryFolders: string[] = [];
const children: SpawnedChild[] = [];

/**
 * A fresh temp folder (resolved, 0700) with a state home path inside it that
 * does not exist yet: the registry makes it (0700) on its first transaction.
 * Both are removed by `cleanUp`.
 */
export function makeStateHome(): string {
  const folder = realpathSync(mkdtempSync(join(tmpdir(), 'registry-')));
  chmodSync(folder, 0o700);
  temporaryFolders.push(folder);
  return join(folder, 'state');
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

/**
 * The ContractError code that `action` (a promise, or a function that may
 * return one) throws or rejects with, or 'no error'. Any other error is
 * rethrown so that it fails the test loudly.
 */
export async function codeOf(action: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof action === 'function' ? action() : action);
  } catch (error) {
    if (ContractError.is(error)) return error.code;
    throw error;
  }
  return 'no error';
}

/** A valid 64-hex configIdentity, derived from a number so that entries differ. */
export function configIdentityOf(index: number): string {
  return createHash('sha256').update(`config-${index}`).digest('hex');
}

/**
 * A valid reservation of `stateHome`, distinct per `index`: root
 * `/srv/workspace-<index>`, endpoint `http://127.0.0.1:<10000 + index>`, fresh
 * lowercase uuids, this host, this process's pid and processStart.
 */
export function reservation(stateHome: string, index: number, overrides: Partial<Reservation> = {}): Reservation {
  const me = currentProcess();
  return {
    root: `/srv/workspace-${index}`,
    stateHome,
    configIdentity: configIdentityOf(index),
    endpoint: `http://127.0.0.1:${10000 + index}`,
    epoch: randomUUID(),
    pid: me.pid,
    host: hostname(),
    ...(me.processStart === undefined ? {} : { processStart: me.processStart }),
    ownerToken: randomUUID(),
    ...overrides,
  };
}

/** `count` valid, mutually compatible reservations of `stateHome`. */
export function reservations(stateHome: string, count: number): Reservation[] {
  return Array.from({ length: count }, (_, index) => reservation(stateHome, index));
}

/**
 * Writes a file by hand, the way a corrupt or foreign state would be left:
 * replaces whatever is there, then makes it 0600 so that PrivateFiles judges
 * its content and not its mode.
 */
export function writePrivateFile(path: string, content: string | Uint8Array): void {
  rmSync(path, { force: true });
  writeFileSync(path, content, { mode: 0o600 });
  chmodSync(path, 0o600);
}

/** The bytes of a file, as a hex string (easy to compare), or undefined when it does not exist. */
export function bytesOf(path: string): string | undefined {
  try {
    return readFileSync(path).toString('hex');
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

/** Whether anything exists at `path` (not following a link). */
export function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch (error) {
    if (isMissing(error)) return false;
    throw error;
  }
}

/** The permission bits of whatever is at `path` (not following a link). */
export function modeOf(path: string): number {
  return lstatSync(path).mode & 0o7777;
}

/** The link count of the file at `path`. */
export function linksOf(path: string): number {
  return lstatSync(path).nlink;
}

/** Sorted names in a folder, or an empty list when it does not exist. */
export function namesIn(folder: string): string[] {
  try {
    return readdirSync(folder).sort();
  } catch (error) {
    if (isMissing(error)) return [];
    throw error;
  }
}

function isMissing(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'code' in error && error.code === 'ENOENT';
}

/** This process's processStart; the lock tests need the Linux form. */
export function myProcessStart(): string {
  const start = currentProcess().processStart;
  if (start === undefined) throw new Error('no processStart on this platform');
  return start;
}

/** `processStart` with one of its fields (1 boot id, 2 PID namespace, 3 start time) changed to another valid value. */
export function withChangedField(processStart: string, field: 1 | 2 | 3): string {
  const fields = processStart.split(':');
  const value = fields[field];
  if (fields.length !== 4 || value === undefined) throw new Error('not a Linux processStart');
  fields[field] = field === 1 ? randomUUID() : String(BigInt(value) + 1n);
  return fields.join(':');
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
  readonly lines: readonly string[];
  /** Resolves once the child has exited (and been reaped) and its output is closed. */
  readonly closed: Promise<ChildEnd>;
  /** Resolves with the first stdout line equal to `expected` (already seen or still to come); rejects if the child ends first. */
  line(expected: string): Promise<void>;
  /** Writes one line to the child's stdin. */
  tell(text: string): void;
}

/** Spawns `node <fixture> ...args` with piped stdio; `cleanUp` kills it if it is still running. */
export function spawnFixture(fixture: string, args: readonly string[]): SpawnedChild {
  const child = spawn(process.execPath, [join(FIXTURES, fixture), ...args], { stdio: 'pipe' });
  const lines: string[] = [];
  const waiters: { expected: string; resolve: () => void }[] = [];
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
      for (const waiter of waiters.filter((candidate) => candidate.expected === line)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  });
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });
  // stdin only releases a holding child; a child that is gone must not fail the parent.
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
    line(expected) {
      if (lines.includes(expected)) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        waiters.push({ expected, resolve });
        void closed.then((end) => {
          if (lines.includes(expected)) resolve();
          else reject(new Error(`${fixture} ended (${end.code ?? end.signal}) before "${expected}": ${end.stderr}`));
        });
      });
    },
    tell(text) {
      child.stdin.write(`${text}\n`);
    },
  };
  children.push(spawned);
  return spawned;
}

/**
 * A child (`fixtures/holder.mjs hold`) that runs a transaction on `stateHome`
 * whose operation prints `holding` and then waits for a line on its stdin;
 * resolves once it holds the lock. `tell('release')` lets it finish: it prints
 * `done` and exits 0.
 */
export async function spawnHolder(stateHome: string): Promise<SpawnedChild> {
  const child = spawnFixture('holder.mjs', ['hold', stateHome]);
  await child.line('holding');
  return child;
}

/** SIGKILLs a child and waits until it is reaped. */
export async function killAndReap(child: SpawnedChild): Promise<ChildEnd> {
  child.process.kill('SIGKILL');
  return child.closed;
}
