import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { basename } from 'node:path';

/** How a child process ended. */
export interface ChildEnd {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderr: string;
}

/** A running child: its stdout lines as they come, a way to write to its stdin, and its end. */
export interface SpawnedChild {
  readonly process: ChildProcessWithoutNullStreams;
  readonly pid: number;
  readonly lines: readonly string[];
  /** Resolves once the child has exited (and been reaped) and its output is closed. */
  readonly closed: Promise<ChildEnd>;
  /** The first stdout line (seen or to come) equal to `wanted` or that it matches; rejects if the child ends first. */
  line(wanted: string | ((line: string) => boolean)): Promise<string>;
  /** Writes one line to the child's stdin. */
  send(text: string): void;
}

interface Waiter {
  readonly matches: (line: string) => boolean;
  readonly resolve: (line: string) => void;
}

const children: SpawnedChild[] = [];
// The parents `spawnUnreaped` started: ended through their stdin, so that they reap their child first.
const unreapedParents: SpawnedChild[] = [];

/** Spawns `node <script> ...args` with piped stdio (and `options.env` and `options.cwd`, default this process's); `cleanUp` kills it (SIGKILL) if it is still running. */
export function spawnChild(script: string, args: readonly string[], options: SpawnOptions = {}): SpawnedChild {
  return spawnNamed(basename(script), process.execPath, [script, ...args], options);
}

/** Spawns `command ...args` (looked up on PATH) as `spawnChild` spawns a script: `spawnCommand('sleep', ['1000'])` is a plain live process. */
export function spawnCommand(command: string, args: readonly string[], options: SpawnOptions = {}): SpawnedChild {
  return spawnNamed(basename(command), command, args, options);
}

interface SpawnOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** The folder it runs in (default this process's). */
  readonly cwd?: string;
}

/** A process started under a parent that does not reap it, and that parent. */
export interface UnreapedChild {
  /** The parent: its `lines` are the child's stdout too. */
  readonly parent: SpawnedChild;
  /** The child's own pid. */
  readonly pid: number;
}

// The parent: a Node process that starts the child, then blocks in a synchronous read of its stdin,
// so its event loop never runs to reap the child (libuv reaps on SIGCHLD, from the loop). Once its
// stdin ends it kills the child (a zombie already, or not), reaps it, and exits: no zombie is left
// to init, which in a container may never reap it.
const UNREAPING_PARENT = `
const { spawn } = require('node:child_process');
const { readSync, writeSync } = require('node:fs');
const [command, ...args] = JSON.parse(process.argv[1]);
const child = spawn(command, args, { stdio: ['ignore', 'inherit', 'inherit'] });
child.on('exit', () => process.exit(0));
writeSync(1, 'unreaped ' + child.pid + '\\n');
try { readSync(0, Buffer.alloc(1)); } catch {}
child.kill('SIGKILL');
`;

/**
 * Runs `command ...args` as the child of a process that does not reap it until `cleanUp`, so that
 * once it exits it stays a zombie, its pid still found by `kill(pid, 0)`: what an owner killed under
 * a parent that does not wait for it leaves (`killUnreaped` makes it one). `cleanUp` ends the
 * parent through its stdin, which then kills and reaps the child.
 */
export async function spawnUnreaped(
  command: string,
  args: readonly string[],
  options: SpawnOptions = {},
): Promise<UnreapedChild> {
  const parent = spawnNamed(
    basename(command),
    process.execPath,
    ['-e', UNREAPING_PARENT, JSON.stringify([command, ...args])],
    options,
  );
  unreapedParents.push(parent);
  const line = await parent.line((text) => text.startsWith('unreaped '));
  return { parent, pid: Number(line.slice('unreaped '.length)) };
}

/** A tracked child (`cleanUp` kills it), called `name` in errors. */
function spawnNamed(name: string, command: string, args: readonly string[], options: SpawnOptions): SpawnedChild {
  const child = spawn(command, args, { stdio: 'pipe', ...options });
  const lines: string[] = [];
  const waiters: Waiter[] = [];
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on(
    'data',
    splitLines((line) => receive(line, lines, waiters)),
  );
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });
  // stdin only releases a waiting child; a child that is gone must not fail the parent.
  child.stdin.on('error', () => {});
  child.on('error', (error) => {
    stderr += `${error.message}\n`;
  });
  const closed = new Promise<ChildEnd>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal, stderr }));
  });
  if (child.pid === undefined) throw new Error(`could not spawn ${name}`);
  const spawned: SpawnedChild = {
    process: child,
    pid: child.pid,
    lines,
    closed,
    line: (wanted) => firstLine(name, lines, waiters, closed, wanted),
    send(text) {
      child.stdin.write(`${text}\n`);
    },
  };
  children.push(spawned);
  return spawned;
}

/** A `data` listener that calls `onLine` with each complete line of text. */
function splitLines(onLine: (line: string) => void): (chunk: string) => void {
  let pending = '';
  return (chunk) => {
    pending += chunk;
    for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n')) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + 1);
      onLine(line);
    }
  };
}

/** Records a stdout line and resolves the waiters it matches. */
function receive(line: string, lines: string[], waiters: Waiter[]): void {
  lines.push(line);
  for (const waiter of waiters.filter((candidate) => candidate.matches(line))) {
    waiters.splice(waiters.indexOf(waiter), 1);
    waiter.resolve(line);
  }
}

/** The first line that is or matches `wanted`, seen already or still to come; rejects once the child has ended without it. */
function firstLine(
  name: string,
  lines: readonly string[],
  waiters: Waiter[],
  closed: Promise<ChildEnd>,
  wanted: string | ((line: string) => boolean),
): Promise<string> {
  const matches = typeof wanted === 'string' ? (line: string) => line === wanted : wanted;
  const seen = lines.find(matches);
  if (seen !== undefined) return Promise.resolve(seen);
  return new Promise<string>((resolve, reject) => {
    waiters.push({ matches, resolve });
    void closed.then((end) => {
      const late = lines.find(matches);
      if (late !== undefined) resolve(late);
      else reject(new Error(`${name} ended (${end.code ?? end.signal}) before the line came: ${end.stderr}`));
    });
  });
}

/** SIGKILLs a child and waits until it is reaped. */
export async function killAndReap(child: SpawnedChild): Promise<ChildEnd> {
  child.process.kill('SIGKILL');
  return child.closed;
}

/** Kills every child spawned here that is still running (SIGKILL) and waits until each is reaped. */
export async function stopChildren(): Promise<void> {
  // Before the kills below: a parent killed first would leave its zombie to init.
  const parents = unreapedParents.splice(0);
  for (const parent of parents) parent.process.stdin.end();
  await Promise.all(parents.map((parent) => parent.closed));
  const running = children.splice(0);
  for (const child of running) {
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
  }
  await Promise.all(running.map((child) => child.closed));
}
