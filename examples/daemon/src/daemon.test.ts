import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { fileOwnership, resolveWorkspace } from '@leasehold/coordination';
import { Registry } from '@leasehold/registry';
import {
  cleanUp,
  codeOfAsync,
  etcdAvailable,
  handPlaces,
  makeTemporaryFolder,
  replaceFile,
  sha256Hex,
  spawnChild,
  startEtcd,
} from '@leasehold/test-utils';
import { fileSystemOf } from '@leasehold/state-home';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';

// The built daemon, run as a user would run it (turbo builds before it tests).
const DAEMON = fileURLToPath(new URL('../dist/daemon.js', import.meta.url));
// The built `leasehold` command (a devDependency, so turbo builds it first): the operator's tool.
const LEASEHOLD = join(
  dirname(createRequire(import.meta.url).resolve('@leasehold/cli/package.json')),
  'dist',
  'leasehold.cjs',
);

interface Place {
  readonly tmp: string;
  readonly workspace: string;
  readonly stateHome: string;
}

interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

interface Daemon {
  readonly child: ChildProcessByStdio<null, Readable, Readable>;
  /** The next JSON line the daemon prints; rejects if its output ends first. */
  next(): Promise<Record<string, unknown>>;
  /** Settles once the process is gone and its output is closed. */
  readonly exited: Promise<Exit>;
  /** Everything it printed so far, on both streams. */
  output(): string;
}

const daemons: Daemon[] = [];

afterEach(async () => {
  const running = daemons.splice(0);
  for (const { child } of running) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  await Promise.all(running.map((daemon) => daemon.exited));
  await cleanUp();
});

beforeAll(() => {
  for (const built of [DAEMON, LEASEHOLD]) {
    if (!existsSync(built)) throw new Error(`${built} is missing: run \`pnpm run build\` first`);
  }
});

/** A private temp folder holding a workspace folder and a state home (created by the daemon). */
function makePlace(): Place {
  const tmp = makeTemporaryFolder('leasehold-example-daemon-');
  const workspace = join(tmp, 'workspace');
  mkdirSync(workspace, { mode: 0o700 });
  return { tmp, workspace: resolveWorkspace(workspace), stateHome: join(tmp, 'state') };
}

function startDaemon(place: Place, extra: readonly string[] = [], env: NodeJS.ProcessEnv = process.env): Daemon {
  const child = spawn(
    process.execPath,
    [DAEMON, '--workspace', place.workspace, '--state-home', place.stateHome, ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'], env },
  );
  let printed = '';
  const lines: string[] = [];
  const waiting: { resolve: (line: string) => void; reject: (error: Error) => void }[] = [];
  let ended = false;
  const ending = () => new Error(`the daemon's output ended; it printed:\n${printed}`);

  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    printed += chunk;
  });
  const reader = createInterface({ input: child.stdout });
  reader.on('line', (line) => {
    printed += `${line}\n`;
    const waiter = waiting.shift();
    if (waiter === undefined) lines.push(line);
    else waiter.resolve(line);
  });
  reader.on('close', () => {
    ended = true;
    for (const waiter of waiting.splice(0)) waiter.reject(ending());
  });
  const exited = new Promise<Exit>((resolve) => {
    child.once('close', (code, signal) => resolve({ code, signal }));
  });

  const daemon: Daemon = {
    child,
    exited,
    output: () => printed,
    next: async () => {
      const line =
        lines.shift() ??
        (await new Promise<string>((resolve, reject) => {
          if (ended) reject(ending());
          else waiting.push({ resolve, reject });
        }));
      return JSON.parse(line) as Record<string, unknown>;
    },
  };
  daemons.push(daemon);
  return daemon;
}

interface Answer {
  readonly status: number;
  readonly body: string;
}

/** One GET on a fresh connection, with exactly these extra headers (`host` overrides the default). */
function get(endpoint: string, path: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = request(new URL(path, endpoint), { method: 'GET', headers, agent: false }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        body += chunk;
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      response.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}

interface Command {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the real `leasehold ARGS --workspace W --state-home S` to its end. */
async function leasehold(place: Place, ...args: string[]): Promise<Command> {
  return leaseholdWith(process.env, place, ...args);
}

/** `leasehold` with the environment `env` (a host's name, for instance). */
async function leaseholdWith(env: NodeJS.ProcessEnv, place: Place, ...args: string[]): Promise<Command> {
  return runScript(LEASEHOLD, [...args, '--workspace', place.workspace, '--state-home', place.stateHome], env);
}

/** Runs `node SCRIPT ARGS` (the real `leasehold`, or the daemon) to its end. */
async function runScript(
  script: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<Command> {
  const child = spawnChild(script, args, { env });
  const { code, stderr } = await child.closed;
  return { code, stdout: child.lines.map((line) => `${line}\n`).join(''), stderr };
}

/** The one JSON line of a `--json` command. */
function jsonLine(command: Command): Record<string, unknown> {
  return JSON.parse(command.stdout) as Record<string, unknown>;
}

/** Every entry under `folder`: its kind, inode, size, change time and the SHA-256 of a file's bytes. */
function treeOf(folder: string): Record<string, string> {
  const tree: Record<string, string> = {};
  const visit = (path: string): void => {
    const stat = lstatSync(path, { bigint: true });
    const name = relative(folder, path) || '.';
    if (stat.isDirectory()) {
      tree[name] = `dir ${stat.ino} ${stat.mode}`;
      for (const entry of readdirSync(path).sort()) visit(join(path, entry));
    } else {
      tree[name] = `file ${stat.ino} ${stat.size} ${stat.ctimeNs} ${sha256Hex(readFileSync(path))}`;
    }
  };
  visit(folder);
  return tree;
}

const README = fileURLToPath(new URL('../README.md', import.meta.url));

/** The README's transcript: its one `text` block. */
function readmeTranscript(): string {
  const blocks = [...readFileSync(README, 'utf8').matchAll(/^```text\n([\s\S]*?)^```$/gm)].map(
    (match) => match[1] ?? '',
  );
  if (blocks.length !== 1)
    throw new Error(`${README}: wants exactly one text block (the transcript), found ${blocks.length}`);
  return blocks[0]!;
}

/** Puts `transcript` in the README in place of its transcript (LEASEHOLD_UPDATE_README=1, after a change of what the commands print). */
function writeReadmeTranscript(transcript: string): void {
  const readme = readFileSync(README, 'utf8');
  writeFileSync(
    README,
    readme.replace(`\`\`\`text\n${readmeTranscript()}\`\`\``, () => `\`\`\`text\n${transcript}\`\`\``),
  );
}

/** What varies from run to run, and the value the README shows for it. */
interface Varying {
  readonly place: Place;
  readonly endpoint: string;
  readonly epoch: string;
  readonly pid: number;
  readonly digest: string;
}

/** A transcript as the README shows it: this run's paths, endpoint, epoch, pid, digest, host and journal record name replaced by the README's. */
function normalised(text: string, { place, endpoint, epoch, pid, digest }: Varying): string {
  const host = hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return (
    text
      .replace(
        /journal\/\d{8}T\d{9}Z-[0-9a-f-]{36}\.json/g,
        'journal/20250301T101500000Z-1f0c3a5e-8d2b-4c41-9a7e-2b6d0c4e9f13.json',
      )
      .replaceAll(digest, 'cb6748830ae9a12784a6258612f61e01cf4837ae8094dbd773aeeb68b4175b10')
      .replaceAll(epoch, 'd2ec2568-64d1-409d-b924-6c036ef5928b')
      .replace(/\/workspaces\/[0-9a-f]{32}\//g, '/workspaces/6b1e4a0f2c9d8e7f3a5b4c2d1e0f9a8b/')
      .replaceAll(place.stateHome, '/tmp/demo/state')
      .replaceAll(place.workspace, '/tmp/demo/ws')
      // The state home's file system is this machine's: the README shows the most common one.
      .replaceAll(`/tmp/demo/state, on ${fileSystemOf(place.stateHome).name} (`, '/tmp/demo/state, on ext2/ext3/ext4 (')
      .replaceAll(endpoint, 'http://127.0.0.1:40507')
      .replace(new RegExp(`(?<=on host |on )${host}(?=[: ])`, 'g'), 'vm')
      .replace(new RegExp(`(?<!\\w)${pid}(?!\\w)`, 'g'), '2195')
  );
}

/** What `leasehold status --json` says of a state home on this test's local disk: its path and its file system. */
function onLocalDisk(stateHome: string): { stateHome: string; fileSystem: Record<string, unknown> } {
  return { stateHome, fileSystem: { ...fileSystemOf(stateHome), allowed: false } };
}

describe('the example daemon', () => {
  it('serves only capability holders, refuses a second owner, releases on SIGTERM and lets a new owner in', async () => {
    const place = makePlace();
    const first = startDaemon(place);
    const ready = await first.next();
    expect(ready).toEqual({
      event: 'ready',
      endpoint: expect.stringMatching(/^http:\/\/127\.0\.0\.1:[1-9][0-9]*$/),
      epoch: expect.stringMatching(/^[0-9a-f-]{36}$/),
      pid: first.child.pid,
    });

    // A local client finds the owner from files, then proves it over the transport.
    const ownership = fileOwnership({ stateHome: place.stateHome });
    const access = await ownership.localAccess(place.workspace);
    expect(access).toMatchObject({ endpoint: ready.endpoint, epoch: ready.epoch });
    const bearer = { authorization: `Bearer ${access.capability}` };

    const hello = await get(access.endpoint, '/hello', bearer);
    expect(hello.status).toBe(200);
    expect(JSON.parse(hello.body)).toEqual({ epoch: ready.epoch, message: expect.any(String) });
    expect((await get(access.endpoint, '/hello', {})).status).toBe(401);
    expect((await get(access.endpoint, '/hello', { authorization: `Bearer ${'A'.repeat(43)}` })).status).toBe(401);
    const port = new URL(access.endpoint).port;
    expect((await get(access.endpoint, '/hello', { ...bearer, host: `localhost:${port}` })).status).toBe(421);
    expect((await get(access.endpoint, '/hello', { ...bearer, host: 'attacker.example' })).status).toBe(421);
    expect((await get(access.endpoint, '/elsewhere', bearer)).status).toBe(404);
    // Files alone cannot prove an idle owner is live: inspect says so, and names whom to ask.
    expect(await ownership.inspect(place.workspace)).toMatchObject({
      status: 'unavailable',
      owner: { epoch: ready.epoch, phase: 'idle' },
    });

    // A second daemon on the same workspace is not the owner.
    const second = startDaemon(place);
    expect(await second.next()).toEqual({ event: 'refused', code: 'conflict' });
    expect(await second.exited).toEqual({ code: 1, signal: null });

    first.child.kill('SIGTERM');
    expect(await first.next()).toEqual({ event: 'released', epoch: ready.epoch });
    expect(await first.exited).toEqual({ code: 0, signal: null });
    // Acquired, phase stopping, released: the registration's third write.
    expect(await ownership.inspect(place.workspace)).toEqual({ status: 'stopped', epoch: ready.epoch, version: 3 });
    expect(await codeOfAsync(ownership.localAccess(place.workspace))).toBe('unavailable');

    // A new owner: a new epoch and a new capability; the old one opens nothing.
    const third = startDaemon(place);
    const again = await third.next();
    expect(again).toMatchObject({ event: 'ready', pid: third.child.pid });
    expect(again.epoch).not.toBe(ready.epoch);
    const newAccess = await ownership.localAccess(place.workspace);
    expect(newAccess.capability).not.toBe(access.capability);
    const newHello = await get(newAccess.endpoint, '/hello', { authorization: `Bearer ${newAccess.capability}` });
    expect(JSON.parse(newHello.body)).toEqual({ epoch: again.epoch, message: expect.any(String) });
    expect((await get(newAccess.endpoint, '/hello', bearer)).status).toBe(401);

    third.child.kill('SIGINT');
    expect(await third.next()).toEqual({ event: 'released', epoch: again.epoch });
    expect(await third.exited).toEqual({ code: 0, signal: null });
    // A new registration counts from 1 again: acquired, phase stopping, released.
    expect(await ownership.inspect(place.workspace)).toEqual({ status: 'stopped', epoch: again.epoch, version: 3 });

    // The secret never reaches an output.
    for (const daemon of [first, second, third]) {
      expect(daemon.output()).not.toContain(access.capability);
      expect(daemon.output()).not.toContain(newAccess.capability);
    }
  });

  it('is running for the real `leasehold status`, answers /hello only with the bearer, and stops with `leasehold stop`', async () => {
    const place = makePlace();
    const daemon = startDaemon(place);
    const ready = await daemon.next();

    const status = await leasehold(place, 'status', '--json');
    expect(status.code).toBe(0);
    expect(jsonLine(status)).toEqual({
      status: 'running',
      ...onLocalDisk(place.stateHome),
      root: place.workspace,
      epoch: ready.epoch,
      endpoint: ready.endpoint,
      pid: daemon.child.pid,
      capabilityFile: expect.stringMatching(/\/service\/local-capability\.json$/),
      config: expect.any(Object),
    });
    const human = await leasehold(place, 'status');
    expect(human.code).toBe(0);
    expect(human.stdout.split('\n')[0]).toBe(`running     ${place.workspace}`);

    // Its own route sits behind the transport's checks.
    const { capability } = await fileOwnership({ stateHome: place.stateHome }).localAccess(place.workspace);
    const hello = await get(ready.endpoint as string, '/hello', { authorization: `Bearer ${capability}` });
    expect(hello.status).toBe(200);
    expect(JSON.parse(hello.body)).toEqual({ epoch: ready.epoch, message: expect.any(String) });
    expect((await get(ready.endpoint as string, '/hello', {})).status).toBe(401);
    expect((await get(ready.endpoint as string, '/hello', { authorization: 'Bearer wrong' })).status).toBe(401);

    const stop = await leasehold(place, 'stop', '--json');
    expect(stop.code).toBe(0);
    expect(jsonLine(stop)).toEqual({ stopped: true, root: place.workspace, epoch: ready.epoch });
    expect(await daemon.next()).toEqual({ event: 'released', epoch: ready.epoch });
    expect(await daemon.exited).toEqual({ code: 0, signal: null });
    const stopped = await leasehold(place, 'status', '--json');
    expect(stopped.code).toBe(3);
    expect(jsonLine(stopped)).toEqual({
      status: 'stopped',
      ...onLocalDisk(place.stateHome),
      root: place.workspace,
      epoch: ready.epoch,
      config: expect.any(Object),
    });
    for (const output of [daemon.output(), status.stdout, human.stdout, stop.stdout, stop.stderr])
      expect(output).not.toContain(capability);
  });

  it('after kill -9 reads unavailable to `leasehold status`, and `leasehold recover` brings it to stopped', async () => {
    const place = makePlace();
    const daemon = startDaemon(place);
    const ready = await daemon.next();
    daemon.child.kill('SIGKILL');
    expect(await daemon.exited).toEqual({ code: null, signal: 'SIGKILL' });

    const crashed = await leasehold(place, 'status', '--json');
    expect(crashed.code).toBe(3);
    expect(jsonLine(crashed)).toEqual({
      status: 'unavailable',
      ...onLocalDisk(place.stateHome),
      root: place.workspace,
      epoch: ready.epoch,
      endpoint: ready.endpoint,
      pid: ready.pid,
      reason: expect.stringContaining('does not answer: its process is gone'),
      reasonCode: 'owner-gone',
      config: expect.objectContaining({ identity: expect.stringMatching(/^[0-9a-f]{64}$/) }),
    });
    // A stop cannot reach it either, and a new daemon is not the owner until recovery: quarantine, the crash's word,
    // and the daemon prints the fix the library put on the error.
    expect((await leasehold(place, 'stop', '--json')).code).toBe(1);
    const blocked = startDaemon(place);
    expect(await blocked.next()).toEqual({ event: 'refused', code: 'quarantine' });
    expect(await blocked.exited).toEqual({ code: 1, signal: null });
    expect(blocked.output()).toContain(
      `then review and release what it left with \`leasehold recover --workspace ${place.workspace} --state-home ${place.stateHome}\``,
    );

    const review = await leasehold(place, 'recover', '--json');
    expect(review.code).toBe(0);
    const { digest, ownerStatus } = jsonLine(review);
    expect(ownerStatus).toBe('absent');
    const recovered = await leasehold(place, 'recover', '--json', '--digest', digest as string, '--yes');
    expect(recovered.code).toBe(0);
    expect(jsonLine(recovered)).toEqual({ recovered: true });
    expect(jsonLine(await leasehold(place, 'status', '--json'))).toEqual({
      status: 'stopped',
      ...onLocalDisk(place.stateHome),
      root: place.workspace,
      epoch: ready.epoch,
      config: expect.any(Object),
    });

    // And it serves again, with a new epoch.
    const again = startDaemon(place);
    const next = await again.next();
    expect(next).toMatchObject({ event: 'ready' });
    expect(next.epoch).not.toBe(ready.epoch);
    expect(jsonLine(await leasehold(place, 'stop', '--json'))).toEqual({
      stopped: true,
      root: place.workspace,
      epoch: next.epoch,
    });
    expect(await again.exited).toEqual({ code: 0, signal: null });
  });

  it("prints the README's transcript after kill -9: status, the refused restart, recover, recover --digest, status", async () => {
    const place = makePlace();
    const daemon = startDaemon(place);
    const ready = await daemon.next();
    daemon.child.kill('SIGKILL');
    expect(await daemon.exited).toEqual({ code: null, signal: 'SIGKILL' });

    // Each command as a person types it (from the repository's root), and what it printed: the daemon says why on stderr first.
    const where = ['--workspace', place.workspace, '--state-home', place.stateHome];
    let transcript = '';
    const step = async (shown: string, script: string, args: readonly string[], exit: number): Promise<Command> => {
      const ran = await runScript(script, args);
      expect(ran.code, `${shown} ${args.join(' ')}: ${ran.stdout}${ran.stderr}`).toBe(exit);
      transcript += `$ ${[shown, ...args].join(' ')}\n${script === DAEMON ? ran.stderr + ran.stdout : ran.stdout + ran.stderr}`;
      return ran;
    };
    await step('leasehold', LEASEHOLD, ['status', ...where], 3);
    await step('node examples/daemon/dist/daemon.js', DAEMON, where, 1);
    const review = await step('leasehold', LEASEHOLD, ['recover', ...where], 0);
    const digest = /^digest +([0-9a-f]{64})$/m.exec(review.stdout)?.[1] ?? '';
    await step('leasehold', LEASEHOLD, ['recover', ...where, '--digest', digest, '--yes'], 0);
    await step('leasehold', LEASEHOLD, ['status', ...where], 3);

    const observed = normalised(transcript, {
      place,
      endpoint: ready.endpoint as string,
      epoch: ready.epoch as string,
      pid: ready.pid as number,
      digest,
    });
    if (process.env.LEASEHOLD_UPDATE_README === '1') writeReadmeTranscript(observed);
    expect(observed).toBe(readmeTranscript());
  });

  it('serves beside the daemons of other workspaces in the same state home, started and stopped together', async () => {
    const place = makePlace();
    const roots = ['a', 'b', 'c'].map((name) => {
      const folder = join(place.tmp, name);
      mkdirSync(folder, { mode: 0o700 });
      return resolveWorkspace(folder);
    });
    const untouched = join(place.tmp, 'untouched');
    mkdirSync(untouched, { mode: 0o700 });
    const daemons = roots.map((workspace) => startDaemon({ ...place, workspace }));
    const readies = await Promise.all(daemons.map((daemon) => daemon.next()));
    readies.forEach((ready, index) => expect(ready).toMatchObject({ event: 'ready', pid: daemons[index]!.child.pid }));
    const ownership = fileOwnership({ stateHome: place.stateHome });
    for (const [index, workspace] of roots.entries()) {
      expect(await ownership.localAccess(workspace)).toMatchObject({
        endpoint: readies[index]!.endpoint,
        epoch: readies[index]!.epoch,
      });
    }
    // A workspace nobody serves reads absent while the others run.
    expect(await ownership.inspect(resolveWorkspace(untouched))).toEqual({ status: 'absent' });

    for (const daemon of daemons) daemon.child.kill('SIGTERM');
    const released = await Promise.all(daemons.map((daemon) => daemon.next()));
    expect(released).toEqual(readies.map((ready) => ({ event: 'released', epoch: ready.epoch })));
    expect(await Promise.all(daemons.map((daemon) => daemon.exited))).toEqual(
      roots.map(() => ({ code: 0, signal: null })),
    );
    for (const [index, workspace] of roots.entries()) {
      expect(await ownership.inspect(workspace)).toEqual({
        status: 'stopped',
        epoch: readies[index]!.epoch,
        version: 3,
      });
    }
  });

  it('exits 2 and touches nothing when its registration is replaced by the same bytes (it lost its lease)', async () => {
    const place = makePlace();
    const daemon = startDaemon(place, ['--watch-ms', '20']);
    const ready = await daemon.next();
    expect(ready).toMatchObject({ event: 'ready' });
    const ownership = fileOwnership({ stateHome: place.stateHome });
    const { capability } = await ownership.localAccess(place.workspace);

    // Same bytes, new inode (a private temp file renamed over it): only the
    // file's stamp changes, and that is already a change under its owner.
    const { registration } = handPlaces(place.stateHome, place.workspace);
    replaceFile(place.tmp, registration, readFileSync(registration));
    const before = treeOf(place.stateHome);

    expect(await daemon.next()).toEqual({ event: 'lost', code: 'conflict' });
    expect(await daemon.exited).toEqual({ code: 2, signal: null });
    // A lost owner touches nothing: every fence is still there, exactly as it was.
    expect(treeOf(place.stateHome)).toEqual(before);
    expect(await ownership.inspect(place.workspace)).toMatchObject({
      status: 'unavailable',
      owner: { epoch: ready.epoch },
    });
    expect(daemon.output()).not.toContain(capability);
  });

  it('on SIGTERM after its files changed (before the self-fence saw it), reports lost and touches nothing', async () => {
    const place = makePlace();
    // A self-fence that will not fire during this test: the signal finds the change first.
    const daemon = startDaemon(place, ['--watch-ms', '3600000']);
    expect(await daemon.next()).toMatchObject({ event: 'ready' });
    const ownership = fileOwnership({ stateHome: place.stateHome });
    const { capability } = await ownership.localAccess(place.workspace);

    const { registration } = handPlaces(place.stateHome, place.workspace);
    replaceFile(place.tmp, registration, readFileSync(registration));
    const before = treeOf(place.stateHome);

    daemon.child.kill('SIGTERM');
    // The stop asserts the lease before its first write (phase `stopping`): it writes nothing.
    expect(await daemon.next()).toEqual({ event: 'lost', code: 'conflict' });
    expect(await daemon.exited).toEqual({ code: 2, signal: null });
    expect(treeOf(place.stateHome)).toEqual(before);
    expect(daemon.output()).not.toContain(capability);
  });

  it('reports release-failed when its release finds the registry held by a live writer, and recovery clears what is left', async () => {
    const place = makePlace();
    const daemon = startDaemon(place);
    const ready = await daemon.next();
    expect(ready).toMatchObject({ event: 'ready' });

    // This test process holds the registry lock (for another root) while the daemon releases.
    const other = join(place.tmp, 'other');
    let inside!: () => void;
    let letGo!: () => void;
    const entered = new Promise<void>((resolve) => (inside = resolve));
    const holding = new Registry(place.stateHome).transaction(other, () => {
      inside();
      return new Promise<void>((resolve) => (letGo = resolve));
    });
    await entered;
    daemon.child.kill('SIGTERM');
    // It went `stopping` and `stopped`, dropped its capability and owner.lock, then waited for the lock: busy.
    expect(await daemon.next()).toEqual({ event: 'release-failed', code: 'busy' });
    expect(await daemon.exited).toEqual({ code: 1, signal: null });
    letGo();
    await holding;

    // Its row and checkout lock remain, naming a process that is gone: not stopped until recovered.
    const status = await leasehold(place, 'status', '--json');
    expect(status.code).toBe(3);
    expect(jsonLine(status).status).not.toBe('stopped');
    const review = jsonLine(await leasehold(place, 'recover', '--json'));
    expect(review).toMatchObject({ ownerStatus: 'absent', digest: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const recovered = await leasehold(place, 'recover', '--json', '--digest', review.digest as string, '--yes');
    expect(recovered.code).toBe(0);
    expect(jsonLine(await leasehold(place, 'status', '--json'))).toEqual({
      status: 'stopped',
      ...onLocalDisk(place.stateHome),
      root: place.workspace,
      epoch: ready.epoch,
      config: expect.any(Object),
    });
  });

  it('reports a workspace that is not a folder as refused, and exits 1', async () => {
    const place = makePlace();
    const daemon = startDaemon({ ...place, workspace: join(place.tmp, 'missing') });
    expect(await daemon.next()).toEqual({ event: 'refused', code: 'refused' });
    expect(await daemon.exited).toEqual({ code: 1, signal: null });
  });
});

describe.skipIf(!etcdAvailable())('the example daemon on the etcd backend', () => {
  it('runs on the backend its state home records, is running for `leasehold status` on its host, seen from another, and stops with `leasehold stop`', async () => {
    const cluster = await startEtcd({ members: 1 });
    const place = makePlace();
    const other = { ...makePlace(), workspace: place.workspace };
    const hostA = { ...process.env, LEASEHOLD_HOST: 'host-a' };
    const hostB = { ...process.env, LEASEHOLD_HOST: 'host-b' };
    const prefix = `/leasehold/daemon-${process.pid}`;
    for (const [at, env] of [
      [place, hostA],
      [other, hostB],
    ] as const) {
      expect(
        (
          await leaseholdWith(
            env,
            at,
            'init',
            '--etcd-endpoints',
            cluster.endpoints.join(','),
            '--etcd-prefix',
            prefix,
            '--json',
          )
        ).code,
      ).toBe(0);
    }

    const daemon = startDaemon(place, [], hostA);
    const ready = await daemon.next();
    expect(ready).toMatchObject({ event: 'ready', pid: daemon.child.pid });
    expect(jsonLine(await leaseholdWith(hostA, place, 'status', '--json'))).toEqual({
      status: 'running',
      ...onLocalDisk(place.stateHome),
      root: place.workspace,
      epoch: ready.epoch,
      endpoint: ready.endpoint,
      pid: daemon.child.pid,
      capabilityFile: expect.stringMatching(/\/service\/local-capability\.json$/),
      config: expect.any(Object),
    });
    // Another host sees who serves it, and cannot take it: not with `leasehold serve`, nor with a daemon of its own.
    expect(jsonLine(await leaseholdWith(hostB, other, 'status', '--json'))).toMatchObject({
      status: 'unavailable',
      epoch: ready.epoch,
      reason: 'served on host host-a',
    });
    const rival = startDaemon(other, [], hostB);
    expect(await rival.next()).toEqual({ event: 'refused', code: 'conflict' });

    const stop = await leaseholdWith(hostA, place, 'stop', '--json');
    expect(jsonLine(stop)).toEqual({ stopped: true, root: place.workspace, epoch: ready.epoch });
    expect(await daemon.next()).toEqual({ event: 'released', epoch: ready.epoch });
    expect(await daemon.exited).toEqual({ code: 0, signal: null });
    expect(jsonLine(await leaseholdWith(hostB, other, 'list', '--json'))).toEqual({ entries: [] });
  });
});
