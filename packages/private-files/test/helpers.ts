import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ContractError } from '@leasehold/contracts';
import { expect } from 'vitest';
import type { MutationStep } from '../src/index.js';

/** The folder of the child-process scripts; they import the built package by its name. */
export const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

const temporaryFolders: string[] = [];
const children: SpawnedChild[] = [];

/**
 * A fresh private root (0700, owned by us) under the system temp folder,
 * removed by `cleanUp`. Resolved, so the root is an absolute, normalised path
 * without a symbolic link above it.
 */
export function makeRoot(): string {
  const folder = realpathSync(mkdtempSync(join(tmpdir(), 'pf-')));
  chmodSync(folder, 0o700);
  temporaryFolders.push(folder);
  return folder;
}

/** Kills every child still running (SIGKILL) and waits for it, then removes every temp folder. */
export async function cleanUp(): Promise<void> {
  const running = children.splice(0);
  for (const child of running) {
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
  }
  await Promise.all(running.map((child) => child.closed));
  for (const folder of temporaryFolders.splice(0)) rmSync(folder, { recursive: true, force: true });
}

/** The ContractError code `action` throws, or 'no error'; any other error is rethrown so it fails loudly. */
export function codeOf(action: () => unknown): string {
  try {
    action();
  } catch (error) {
    if (ContractError.is(error)) return error.code;
    throw error;
  }
  return 'no error';
}

/**
 * The ContractError code `action` throws, after asserting that it changed
 * nothing below `root`: same names, same bytes, same inode, mode, owner, link
 * count, size, mtime and ctime for every entry (staging folder included).
 */
export function unchangedCodeOf(root: string, action: () => unknown): string {
  const before = treeOf(root);
  const code = codeOf(action);
  expect(treeOf(root)).toEqual(before);
  return code;
}

/** SHA-256 hex of `bytes`, computed here with node:crypto, independently of the package. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** UTF-8 bytes of a text. */
export function bytesOf(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

/** The permission bits of whatever is at `path` (not following a link). */
export function modeOf(path: string): number {
  return lstatSync(path).mode & 0o7777;
}

/** One entry of a tree listing: everything a call could change, except the access time. */
export interface TreeEntry {
  readonly kind: 'file' | 'folder' | 'symlink' | 'other';
  readonly mode: number;
  readonly uid: number;
  readonly ino: string;
  readonly nlink: string;
  readonly size: string;
  readonly mtimeNs: string;
  readonly ctimeNs: string;
  /** Bytes of a regular file (hex), the target of a link; never read from a FIFO or device. */
  readonly content: string;
}

/** Every name below `root` (recursively, the root itself as '.') with its stat and content. */
export function treeOf(root: string): Record<string, TreeEntry> {
  const tree: Record<string, TreeEntry> = {};
  const visit = (relative: string): void => {
    const path = relative === '.' ? root : join(root, relative);
    const stats = lstatSync(path, { bigint: true });
    const kind = stats.isFile() ? 'file' : stats.isDirectory() ? 'folder' : stats.isSymbolicLink() ? 'symlink' : 'other';
    const content =
      kind === 'file' ? readFileSync(path).toString('hex') : kind === 'symlink' ? readlinkSync(path) : '';
    tree[relative] = {
      kind,
      mode: Number(stats.mode),
      uid: Number(stats.uid),
      ino: String(stats.ino),
      nlink: String(stats.nlink),
      size: String(stats.size),
      mtimeNs: String(stats.mtimeNs),
      ctimeNs: String(stats.ctimeNs),
      content,
    };
    if (kind === 'folder') {
      for (const name of readdirSync(path).sort()) visit(relative === '.' ? name : join(relative, name));
    }
  };
  visit('.');
  return tree;
}

/** Sorted names in a folder, or undefined when it does not exist. */
export function namesIn(folder: string): string[] | undefined {
  try {
    return readdirSync(folder).sort();
  } catch (error) {
    if (typeof error === 'object' && error !== null && 'code' in error && error.code === 'ENOENT') return undefined;
    throw error;
  }
}

/** A mutation step as the hook reports it, reduced to plain data. */
export function plainStep(step: MutationStep): MutationStep {
  return { operation: step.operation, action: step.action, path: step.path };
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
  /** The first stdout line (already seen or still to come) that `matches`; rejects if the child ends first. */
  line(matches: (line: string) => boolean): Promise<string>;
}

/**
 * Spawns `node <fixture> ...args` with piped stdio; the child is killed by
 * `cleanUp` if it is still running when the test ends.
 */
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
  // stdin is only used to release a paused child; a child that is gone must not fail the parent.
  child.stdin.on('error', () => {});
  child.on('error', (error) => {
    stderr += `${error.message}\n`;
  });
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

/** SIGKILLs a child and waits until it is reaped. */
export async function killAndReap(child: SpawnedChild): Promise<ChildEnd> {
  child.process.kill('SIGKILL');
  return child.closed;
}

/** A plan for `fixtures/writer.mjs`: operations run in order through one PrivateFiles. */
export type WriterOperation =
  | { readonly op: 'create'; readonly path: string; readonly text: string }
  | { readonly op: 'replace'; readonly path: string; readonly text: string }
  | { readonly op: 'directory'; readonly path: string }
  | { readonly op: 'createFolder'; readonly path: string; readonly files: Readonly<Record<string, string>> };

/** Where the writer stops: the n-th hook call, or the first call with this action (and operation). */
export type WriterStop =
  | { readonly how: 'kill' | 'pause'; readonly at: number }
  | { readonly how: 'kill' | 'pause'; readonly action: string; readonly operation?: string };

export interface WriterPlan {
  readonly root: string;
  readonly operations: readonly WriterOperation[];
  readonly stop?: WriterStop;
}

/** Runs `fixtures/writer.mjs` with a plan; it prints `step`, `paused` and `done` lines as JSON. */
export function spawnWriter(plan: WriterPlan): SpawnedChild {
  return spawnFixture('writer.mjs', [JSON.stringify(plan)]);
}

/** The parsed JSON stdout lines of a writer that have a given key. */
export function writerMessages(child: SpawnedChild, key: string): unknown[] {
  return child.lines
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((message) => key in message)
    .map((message) => message[key]);
}

/** Whether a writer's stdout line is a JSON message with `key`. */
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
