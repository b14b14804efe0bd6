import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { ServiceCoordination, resolveWorkspace } from '@leasehold/coordination';
import { cleanUp, codeOf, makeTemporaryFolder, replaceFile, sha256Hex } from '@leasehold/test-utils';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';

// The built daemon, run as a user would run it (turbo builds before it tests).
const DAEMON = fileURLToPath(new URL('../dist/daemon.js', import.meta.url));

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
  if (!existsSync(DAEMON)) throw new Error(`${DAEMON} is missing: run \`pnpm run build\` first`);
});

/** A private temp folder holding a workspace folder and a state home (created by the daemon). */
function makePlace(): Place {
  const tmp = makeTemporaryFolder('leasehold-example-daemon-');
  const workspace = join(tmp, 'workspace');
  mkdirSync(workspace, { mode: 0o700 });
  return { tmp, workspace: resolveWorkspace(workspace), stateHome: join(tmp, 'state') };
}

function startDaemon(place: Place, extra: readonly string[] = []): Daemon {
  const child = spawn(
    process.execPath,
    [DAEMON, '--workspace', place.workspace, '--state-home', place.stateHome, ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'] },
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
    const coordination = new ServiceCoordination(place.workspace, { stateHome: place.stateHome });
    const access = coordination.localAccess();
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
    expect(coordination.inspect()).toMatchObject({ status: 'unavailable', owner: { epoch: ready.epoch, phase: 'idle' } });

    // A second daemon on the same workspace is not the owner.
    const second = startDaemon(place);
    expect(await second.next()).toEqual({ event: 'refused', code: 'conflict' });
    expect(await second.exited).toEqual({ code: 1, signal: null });

    first.child.kill('SIGTERM');
    expect(await first.next()).toEqual({ event: 'released', epoch: ready.epoch });
    expect(await first.exited).toEqual({ code: 0, signal: null });
    expect(coordination.inspect()).toEqual({ status: 'stopped', epoch: ready.epoch });
    expect(codeOf(() => coordination.localAccess())).toBe('unavailable');

    // A new owner: a new epoch and a new capability; the old one opens nothing.
    const third = startDaemon(place);
    const again = await third.next();
    expect(again).toMatchObject({ event: 'ready', pid: third.child.pid });
    expect(again.epoch).not.toBe(ready.epoch);
    const newAccess = coordination.localAccess();
    expect(newAccess.capability).not.toBe(access.capability);
    const newHello = await get(newAccess.endpoint, '/hello', { authorization: `Bearer ${newAccess.capability}` });
    expect(JSON.parse(newHello.body)).toEqual({ epoch: again.epoch, message: expect.any(String) });
    expect((await get(newAccess.endpoint, '/hello', bearer)).status).toBe(401);

    third.child.kill('SIGINT');
    expect(await third.next()).toEqual({ event: 'released', epoch: again.epoch });
    expect(await third.exited).toEqual({ code: 0, signal: null });
    expect(coordination.inspect()).toEqual({ status: 'stopped', epoch: again.epoch });

    // The secret never reaches an output.
    for (const daemon of [first, second, third]) {
      expect(daemon.output()).not.toContain(access.capability);
      expect(daemon.output()).not.toContain(newAccess.capability);
    }
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
    for (const [index, workspace] of roots.entries()) {
      const coordination = new ServiceCoordination(workspace, { stateHome: place.stateHome });
      expect(coordination.localAccess()).toMatchObject({ endpoint: readies[index]!.endpoint, epoch: readies[index]!.epoch });
    }
    // A workspace nobody serves reads absent while the others run.
    expect(new ServiceCoordination(resolveWorkspace(untouched), { stateHome: place.stateHome }).inspect()).toEqual({ status: 'absent' });

    for (const daemon of daemons) daemon.child.kill('SIGTERM');
    const released = await Promise.all(daemons.map((daemon) => daemon.next()));
    expect(released).toEqual(readies.map((ready) => ({ event: 'released', epoch: ready.epoch })));
    expect(await Promise.all(daemons.map((daemon) => daemon.exited))).toEqual(roots.map(() => ({ code: 0, signal: null })));
    for (const [index, workspace] of roots.entries()) {
      const coordination = new ServiceCoordination(workspace, { stateHome: place.stateHome });
      expect(coordination.inspect()).toEqual({ status: 'stopped', epoch: readies[index]!.epoch });
    }
  });

  it('exits 2 and touches nothing when its registration is replaced by the same bytes (it lost its lease)', async () => {
    const place = makePlace();
    const daemon = startDaemon(place, ['--watch-ms', '20']);
    const ready = await daemon.next();
    expect(ready).toMatchObject({ event: 'ready' });
    const coordination = new ServiceCoordination(place.workspace, { stateHome: place.stateHome });
    const { capability } = coordination.localAccess();

    // Same bytes, new inode (a private temp file renamed over it): only the
    // file's stamp changes, and that is already a change under its owner.
    const registration = coordination.places.registration;
    replaceFile(place.tmp, registration, readFileSync(registration));
    const before = treeOf(place.stateHome);

    expect(await daemon.next()).toEqual({ event: 'lost', code: 'conflict' });
    expect(await daemon.exited).toEqual({ code: 2, signal: null });
    // A lost owner touches nothing: every fence is still there, exactly as it was.
    expect(treeOf(place.stateHome)).toEqual(before);
    expect(coordination.inspect()).toMatchObject({ status: 'unavailable', owner: { epoch: ready.epoch } });
    expect(daemon.output()).not.toContain(capability);
  });

  it('on SIGTERM after its files changed (before the self-fence saw it), reports release-failed and touches nothing', async () => {
    const place = makePlace();
    // A self-fence that will not fire during this test: the signal finds the change first.
    const daemon = startDaemon(place, ['--watch-ms', '3600000']);
    expect(await daemon.next()).toMatchObject({ event: 'ready' });
    const coordination = new ServiceCoordination(place.workspace, { stateHome: place.stateHome });
    const { capability } = coordination.localAccess();

    const registration = coordination.places.registration;
    replaceFile(place.tmp, registration, readFileSync(registration));
    const before = treeOf(place.stateHome);

    daemon.child.kill('SIGTERM');
    expect(await daemon.next()).toEqual({ event: 'release-failed', code: 'conflict' });
    expect(await daemon.exited).toEqual({ code: 1, signal: null });
    expect(treeOf(place.stateHome)).toEqual(before);
    expect(daemon.output()).not.toContain(capability);
  });

  it('reports a workspace that is not a folder as refused, and exits 1', async () => {
    const place = makePlace();
    const daemon = startDaemon({ ...place, workspace: join(place.tmp, 'missing') });
    expect(await daemon.next()).toEqual({ event: 'refused', code: 'refused' });
    expect(await daemon.exited).toEqual({ code: 1, signal: null });
  });
});
