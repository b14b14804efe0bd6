import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fileSystemOf, processIdentity, type FileSystem } from '@leasehold/private-files';
import {
  makeTemporaryFolder,
  messageOf,
  namesIn,
  spawnSharedFixture,
  treeOf,
  type SpawnedChild,
} from '@leasehold/test-utils';
import { capabilitiesSeen, transcript } from './transcript.js';

/** The built `leasehold` command; the tests run it as a real process. */
export const BIN = fileURLToPath(new URL('../dist/leasehold.cjs', import.meta.url));

/**
 * A bound on every wait, so that a broken build fails a test, saying what it waited for, instead
 * of hanging it. Generous, and under the test timeout: a fixture that starts 256 owners may take
 * tens of seconds on a loaded machine, and that is slow, not broken.
 */
const WAIT_BOUND_MS = 90_000;

/** A finished command. */
export interface Result {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The JSON objects of a `--json` output, one per line. */
export function jsonLines(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** A file system as `status`, `doctor` and `init` report one on this test's local disk: proven, so no allowance. */
export function localFileSystem(path: string): FileSystem & { readonly allowed: boolean } {
  return { ...fileSystemOf(path), allowed: false };
}

/** What `status --json` says of a state home on this test's local disk: its path and its file system. */
export function onLocalDisk(stateHome: string): { stateHome: string; fileSystem: FileSystem & { allowed: boolean } } {
  return { stateHome, fileSystem: localFileSystem(stateHome) };
}

/** The single JSON object of a `--json` output. */
export function json(result: Result): Record<string, unknown> {
  const lines = jsonLines(result.stdout);
  if (lines.length !== 1)
    throw new Error(`expected one JSON line, got ${lines.length}: ${result.stdout}${result.stderr}`);
  return lines[0]!;
}

const children = new Set<ChildProcess>();

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null)
      resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

/** Options of one process. */
export interface SpawnOptions {
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
}

function spawnTracked(command: string, args: readonly string[], options: SpawnOptions): ChildProcess {
  const child = spawn(command, [...args], {
    cwd: options.cwd ?? tmpdir(),
    env: options.env ?? cleanEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** The environment without any Leasehold, XDG or package manager setting inherited from whatever runs the tests. */
export function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.LEASEHOLD_STATE_HOME;
  delete env.XDG_STATE_HOME;
  // As a person at a shell runs it, however the tests were started (`pnpm test`, `npx vitest`):
  // the command prints its remedies as it was invoked, which these variables would tell it.
  for (const key of Object.keys(env)) if (key.startsWith('npm_')) delete env[key];
  return { ...env, ...extra };
}

/** Runs a process to its end and collects its output (into the transcript too). Killed after WAIT_BOUND_MS. */
async function runProcess(command: string, args: readonly string[], options: SpawnOptions = {}): Promise<Result> {
  const child = spawnTracked(command, args, options);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const bound = setTimeout(() => child.kill('SIGKILL'), WAIT_BOUND_MS);
  const [exit] = await Promise.all([
    exitOf(child),
    new Promise((resolve) => child.stdout!.once('close', resolve)),
    new Promise((resolve) => child.stderr!.once('close', resolve)),
  ]);
  clearTimeout(bound);
  transcript.push(stdout, stderr);
  return { ...exit, stdout, stderr };
}

/** Runs `leasehold ARGS` with the built binary. */
export function cli(args: readonly string[], options: SpawnOptions = {}): Promise<Result> {
  return runProcess(process.execPath, [BIN, ...args], options);
}

/** What `serve` announces once it serves. */
export interface Ready {
  readonly event: 'ready';
  readonly endpoint: string;
  readonly epoch: string;
  readonly pid: number;
}

/** A process left running in the background, with its output collected as it comes. */
export class Background {
  readonly child: ChildProcess;
  /** The exit with all output; the output joins the transcript. */
  readonly exited: Promise<Result>;
  stdout = '';
  stderr = '';

  constructor(command: string, args: readonly string[], options: SpawnOptions = {}) {
    this.child = spawnTracked(command, args, options);
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (this.stdout += chunk));
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    const closed = Promise.all([
      new Promise((resolve) => this.child.stdout!.once('close', resolve)),
      new Promise((resolve) => this.child.stderr!.once('close', resolve)),
    ]);
    this.exited = Promise.all([exitOf(this.child), closed]).then(([exit]) => {
      transcript.push(this.stdout, this.stderr);
      return { ...exit, stdout: this.stdout, stderr: this.stderr };
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /**
   * Resolves with what `find` finds in stdout, checked whenever output
   * arrives; rejects when the process exits first or the bound passes.
   */
  until<T>(find: (stdout: string) => T | undefined, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = find(this.stdout);
        if (found === undefined) return false;
        cleanup();
        resolve(found);
        return true;
      };
      const onData = () => void check();
      const onExit = () =>
        // The last output may still be in the pipe when 'exit' fires.
        void this.exited.then(() => {
          if (check()) return;
          cleanup();
          reject(new Error(`exited before ${what}: ${this.stdout}${this.stderr}`));
        });
      const bound = setTimeout(() => {
        cleanup();
        reject(new Error(`no ${what} after ${WAIT_BOUND_MS} ms: ${this.stdout}${this.stderr}`));
      }, WAIT_BOUND_MS);
      const cleanup = () => {
        clearTimeout(bound);
        this.child.stdout!.off('data', onData);
        this.child.off('exit', onExit);
      };
      if (check()) return;
      this.child.stdout!.on('data', onData);
      this.child.once('exit', onExit);
    });
  }

  /** SIGKILL, and wait until it is reaped. */
  async kill9(): Promise<Result> {
    this.child.kill('SIGKILL');
    return this.exited;
  }

  /** Bounded wait for the exit. */
  async exit(): Promise<Result> {
    let bound: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      bound = setTimeout(
        () => reject(new Error(`still running after ${WAIT_BOUND_MS} ms: ${this.stdout}${this.stderr}`)),
        WAIT_BOUND_MS,
      );
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(bound);
    }
  }
}

/** A running `leasehold serve` (with --json unless asked otherwise). */
export class Server extends Background {
  readonly json: boolean;

  constructor(args: readonly string[], options: SpawnOptions & { json?: boolean }) {
    const json = options.json ?? true;
    super(process.execPath, [BIN, 'serve', ...(json ? ['--json'] : []), ...args], options);
    this.json = json;
  }

  /**
   * Resolves with the `{"event":"ready",...}` line (without --json: the same
   * fields read from the table a person sees, once its last line is out).
   */
  ready(): Promise<Ready> {
    return this.until((stdout) => (this.json ? readyLine(stdout) : readyTable(stdout)), 'ready line');
  }
}

function readyLine(stdout: string): Ready | undefined {
  const line = stdout.split('\n').find((text) => text.includes('"event":"ready"'));
  return line === undefined ? undefined : (JSON.parse(line) as Ready);
}

function readyTable(stdout: string): Ready | undefined {
  if (!/^Stop it with .*\n/m.test(stdout)) return undefined;
  const row = (label: string) => new RegExp(`^${label} +(\\S+)$`, 'm').exec(stdout)?.[1] ?? '';
  return { event: 'ready', endpoint: row('endpoint'), epoch: row('epoch'), pid: Number(row('pid')) };
}

/**
 * The start time a live process of this host records (`processStart`), read below the seam: what a
 * test needs to make a fence name another process by hand (a reused pid). Throws when it is gone.
 */
export function processStartOf(pid: number): string {
  const processStart = processIdentity(pid)?.processStart;
  if (processStart === undefined) throw new Error(`pid ${pid}: no start time to read (gone, or not Linux)`);
  return processStart;
}

/**
 * A plain tool holding the workspace's checkout lock (test-utils' shared checkout-holder fixture,
 * given the built coordination), once it holds it; `cleanUp` of test-utils kills it if it still runs.
 */
export async function checkoutHolder(workspace: string, stateHome: string): Promise<SpawnedChild> {
  const holder = spawnSharedFixture(
    'checkout-holder',
    { workspace, stateHome },
    { '@leasehold/coordination': import.meta.resolve('@leasehold/coordination') },
  );
  await messageOf(holder, 'held');
  return holder;
}

/**
 * A registry writer inside its transaction for `root` (test/fixtures/registry-writer.mjs),
 * once it holds the registry lock: kill it to leave a dead writer's lock behind.
 */
export async function registryWriter(stateHome: string, root: string): Promise<Background> {
  const writer = new Background(process.execPath, [REGISTRY_WRITER, stateHome, root]);
  await writer.until((stdout) => (stdout.includes('"event":"in-transaction"') ? true : undefined), 'transaction');
  return writer;
}

const REGISTRY_WRITER = fileURLToPath(new URL('./fixtures/registry-writer.mjs', import.meta.url));

/** A process that owns `count` workspaces of `box` (`w0`, `w1`…) at once, started and holding them: SIGKILL it to leave them crashed. */
export async function manyOwners(box: Sandbox, count: number): Promise<{ owner: Background; roots: string[] }> {
  const owner = new Background(process.execPath, [MANY_OWNERS, box.stateHome, box.folder, String(count)]);
  const roots = await owner.until(
    (stdout) => (stdout.includes('"event":"owned"') ? (JSON.parse(stdout) as { roots: string[] }).roots : undefined),
    'owned',
  );
  return { owner, roots };
}

const MANY_OWNERS = fileURLToPath(new URL('./fixtures/many-owners.mjs', import.meta.url));

/** Kills every process still running (SIGKILL) and waits for each. */
export async function killAll(): Promise<void> {
  const running = [...children];
  for (const child of running) child.kill('SIGKILL');
  await Promise.all(running.map(exitOf));
}

/** A temp folder with a state home, workspaces and a `leasehold` on PATH for suggested commands. */
export class Sandbox {
  readonly folder: string;
  readonly stateHome: string;
  readonly binFolder: string;

  constructor() {
    this.folder = makeTemporaryFolder('leasehold-cli-');
    this.stateHome = join(this.folder, 'state');
    this.binFolder = join(this.folder, 'bin');
    mkdirSync(this.binFolder);
    const shim = join(this.binFolder, 'leasehold');
    writeFileSync(shim, `#!/bin/sh\nexec '${process.execPath}' '${BIN}' "$@"\n`);
    chmodSync(shim, 0o755);
  }

  /** A real workspace folder (its realpath). */
  workspace(name: string): string {
    const path = join(this.folder, name);
    mkdirSync(path, { recursive: true });
    return realpathSync(path);
  }

  /** `--workspace W --state-home S`. */
  place(workspace: string): string[] {
    return ['--workspace', workspace, '--state-home', this.stateHome];
  }

  /** Starts `leasehold serve --json ARGS` on `workspace`, waits for ready, and records its capability. */
  async serve(
    workspace: string,
    extra: readonly string[] = [],
    json = true,
  ): Promise<{ server: Server; ready: Ready }> {
    const server = new Server([...this.place(workspace), ...extra], { json });
    const ready = await server.ready();
    this.recordCapabilities();
    return { server, ready };
  }

  /** Runs a suggested command line in `sh -c`, with this sandbox's `leasehold` first on PATH. */
  shell(command: string): Promise<Result> {
    return runProcess('/bin/sh', ['-c', command], {
      env: cleanEnv({ PATH: `${this.binFolder}:${process.env.PATH ?? ''}` }),
    });
  }

  /** The namespace folder `<stateHome>/v1`. */
  get namespace(): string {
    return join(this.stateHome, 'v1');
  }

  /** The service folders that exist (one per workspace ever served). */
  serviceFolders(): string[] {
    const workspaces = join(this.namespace, 'workspaces');
    return namesIn(workspaces).map((name) => join(workspaces, name, 'service'));
  }

  /** Every capability file now present: `{ path, epoch, capability }`, as a client with file access reads it. */
  capabilities(): Array<{ path: string; epoch: string; capability: string }> {
    return this.serviceFolders().flatMap((service) => {
      const path = join(service, 'local-capability.json');
      let text: string;
      try {
        text = readFileSync(path, 'utf8');
      } catch (error) {
        // Absent, or removed since the folder was listed (another workspace's owner released meanwhile).
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw error;
      }
      const document = JSON.parse(text) as { epoch: string; capability: string };
      return [{ path, epoch: document.epoch, capability: document.capability }];
    });
  }

  /** Remembers every capability present now, for the secrets check. */
  recordCapabilities(): void {
    for (const { capability } of this.capabilities()) capabilitiesSeen.add(capability);
  }

  /** Adds every file under the state home (capability files excepted) to the transcript, then removes the folder. */
  remove(): void {
    for (const [path, entry] of Object.entries(treeOf(this.stateHome))) {
      if (entry.kind === 'file' && basename(path) !== 'local-capability.json')
        transcript.push(Buffer.from(entry.content, 'hex').toString('latin1'));
    }
    rmSync(this.folder, { recursive: true, force: true });
  }
}

const sandboxes: Sandbox[] = [];

/** A new sandbox, removed by `removeSandboxes`. */
export function sandbox(): Sandbox {
  const made = new Sandbox();
  sandboxes.push(made);
  return made;
}

/** Removes every sandbox `sandbox` made (each adds its state home's files to the transcript first). */
export function removeSandboxes(): void {
  for (const made of sandboxes.splice(0)) made.remove();
}

/** A process that has exited (and been reaped): its pid names nobody now. */
export async function deadPid(): Promise<number> {
  const child = spawnTracked(process.execPath, ['-e', ''], {});
  const pid = child.pid!;
  await exitOf(child);
  return pid;
}

/** A plain HTTP request with exactly the headers given (and no Host unless one is given), and `body` when given. */
export function httpRequest(
  endpoint: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  hostname?: string,
  body?: string,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const url = new URL(endpoint);
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        host: hostname ?? url.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: Number(url.port),
        method,
        path,
        headers,
        setHost: false,
        timeout: WAIT_BOUND_MS,
        agent: false,
      },
      (incoming) => {
        let body = '';
        incoming.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
        incoming.on('end', () => {
          transcript.push(body);
          resolve({ status: incoming.statusCode ?? 0, body, headers: { ...incoming.headers } });
        });
      },
    );
    outgoing.on('timeout', () => outgoing.destroy(new Error('no answer in time')));
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}
