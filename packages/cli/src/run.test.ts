import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { treeOf } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  BIN,
  Background,
  capabilityLeaks,
  cli,
  httpRequest,
  json,
  killAll,
  removeSandboxes,
  sandbox,
  transcript,
  type Result,
  type Sandbox,
} from '../test/helpers.js';

const ENDPOINT = /^http:\/\/127\.0\.0\.1:[1-9][0-9]*$/;
const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DIGEST = /^[0-9a-f]{64}$/;

/** A program no one here wrote: Python's own HTTP server, on a free port it picks, announcing it unbuffered. */
const PYTHON_SERVER = 'python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$0"';

/** Every program `run` announced, so that none outlives its test. */
const programs = new Set<number>();

afterEach(async () => {
  await killAll();
  await killPrograms();
  removeSandboxes();
  // After every test, alone or not: no capability seen so far is in any output, answer or state file.
  expect(capabilityLeaks()).toEqual([]);
});

/** What `run --json` announces once its program may act. */
interface RunReady {
  readonly event: 'ready';
  readonly endpoint: string;
  readonly epoch: string;
  readonly pid: number;
  readonly childPid: number;
}

/** `run`'s own JSON records: its stdout also carries what the program prints. */
function events(stdout: string): Array<Record<string, unknown>> {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Gone: no such process, or one that exited and waits to be reaped (it holds nothing). */
function gone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return /^[ZX]$/.test(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]!);
  } catch {
    return true;
  }
}

/** Resolves once `pid` is gone; bounded so that a program that stays fails its test. */
async function untilGone(pid: number): Promise<void> {
  for (let tries = 0; !gone(pid); tries += 1) {
    if (tries > 3000) throw new Error(`pid ${pid} still runs`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** SIGKILL to the process group of every program still there, and a wait until each is gone. */
async function killPrograms(): Promise<void> {
  for (const pid of programs) {
    try {
      if (!gone(pid)) process.kill(-pid, 'SIGKILL');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
    await untilGone(pid);
  }
  programs.clear();
}

/** `leasehold run --json` on `workspace` with `program`, once its program may act. */
async function startRun(box: Sandbox, workspace: string, program: readonly string[], extra: readonly string[] = []): Promise<{ runner: Background; ready: RunReady }> {
  const runner = new Background(process.execPath, [BIN, 'run', '--json', ...box.place(workspace), ...extra, '--', ...program]);
  const ready = await runner.until((stdout) => events(stdout).find((event) => event.event === 'ready') as RunReady | undefined, 'ready line');
  programs.add(ready.childPid);
  box.recordCapabilities();
  return { runner, ready };
}

/** The port Python's server announced: it listens from then on. */
function portOf(runner: Background): Promise<number> {
  return runner.until((stdout) => {
    const port = /^Serving HTTP on \S+ port (\d+)/m.exec(stdout)?.[1];
    return port === undefined ? undefined : Number(port);
  }, 'python server');
}

async function answers(port: number): Promise<number> {
  return (await httpRequest(`http://127.0.0.1:${port}`, 'GET', '/', {})).status;
}

/** `run`'s exit after a clean stop of its program: status 0, ready, the program's end, stopped. */
function expectStopped(ended: Result, ready: RunReady, signal: NodeJS.Signals): void {
  expect(ended.code).toBe(0);
  expect(events(ended.stdout)).toEqual([
    ready,
    { event: 'child-exited', childPid: ready.childPid, code: null, signal },
    { event: 'stopped', epoch: ready.epoch },
  ]);
}

async function statusOf(box: Sandbox, workspace: string): Promise<Record<string, unknown>> {
  return json(await cli(['status', ...box.place(workspace), '--json']));
}

describe('leasehold run: a program as the owner, through the built binary', () => {
  it('serves the workspace with python3 -m http.server as its program, tells it where its owner is but never the capability, and stop ends it first', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const envFile = join(box.folder, 'program-env.txt');
    const { runner, ready } = await startRun(box, workspace, ['sh', '-c', `env > "$1"; exec ${PYTHON_SERVER}`, workspace, envFile]);
    expect(ready).toEqual({ event: 'ready', endpoint: expect.stringMatching(ENDPOINT), epoch: expect.stringMatching(ID), pid: runner.pid, childPid: expect.any(Number) });
    expect(ready.childPid).not.toBe(runner.pid);

    expect(await statusOf(box, workspace)).toEqual({ status: 'running', root: workspace, epoch: ready.epoch, endpoint: ready.endpoint, pid: runner.pid, capabilityFile: expect.stringMatching(/\/service\/local-capability\.json$/), config: expect.any(Object) });
    expect(await answers(await portOf(runner))).toBe(200);

    const environment = readFileSync(envFile, 'utf8');
    transcript.push(environment);
    const leasehold = environment.split('\n').filter((line) => line.startsWith('LEASEHOLD_')).sort();
    expect(leasehold).toEqual([
      `LEASEHOLD_ENDPOINT=${ready.endpoint}`,
      `LEASEHOLD_EPOCH=${ready.epoch}`,
      `LEASEHOLD_STATE_HOME=${box.stateHome}`,
      `LEASEHOLD_WORKSPACE=${workspace}`,
    ]);

    const stop = await cli(['stop', ...box.place(workspace), '--json']);
    expect(stop.code).toBe(0);
    expect(json(stop)).toEqual({ stopped: true, root: workspace, epoch: ready.epoch });
    expectStopped(await runner.exit(), ready, 'SIGTERM');
    expect(gone(ready.childPid)).toBe(true);
    expect(await statusOf(box, workspace)).toEqual({ status: 'stopped', root: workspace, epoch: ready.epoch, config: expect.any(Object) });
  });

  it.each([
    { program: 'exit 7', status: 7, exit: { code: 7, signal: null } },
    { program: 'kill -9 $$', status: 137, exit: { code: null, signal: 'SIGKILL' } },
  ])('exits $status when its program runs `$program` by itself, and releases first', async ({ program, status, exit }) => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { runner, ready } = await startRun(box, workspace, ['sh', '-c', program]);
    const ended = await runner.exit();
    expect(ended.code).toBe(status);
    expect(events(ended.stdout)).toEqual([ready, { event: 'child-exited', childPid: ready.childPid, ...exit }, { event: 'stopped', epoch: ready.epoch }]);
    expect(await statusOf(box, workspace)).toEqual({ status: 'stopped', root: workspace, epoch: ready.epoch, config: expect.any(Object) });
  });

  it('stops its program, then the workspace, on SIGHUP (a closed terminal), and exits 0', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { runner, ready } = await startRun(box, workspace, ['sh', '-c', `exec ${PYTHON_SERVER}`, workspace]);
    expect(await answers(await portOf(runner))).toBe(200);
    runner.child.kill('SIGHUP');
    expectStopped(await runner.exit(), ready, 'SIGTERM');
    expect(gone(ready.childPid)).toBe(true);
    expect(await statusOf(box, workspace)).toEqual({ status: 'stopped', root: workspace, epoch: ready.epoch, config: expect.any(Object) });
  });

  it('sends SIGKILL to a program that ignores SIGTERM once --stop-timeout has passed', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    // An ignored signal stays ignored across exec: python never sees the SIGTERM.
    const { runner, ready } = await startRun(box, workspace, ['sh', '-c', `trap "" TERM; exec ${PYTHON_SERVER}`, workspace], ['--stop-timeout', '1']);
    expect(await answers(await portOf(runner))).toBe(200);
    expect(json(await cli(['stop', ...box.place(workspace), '--json']))).toEqual({ stopped: true, root: workspace, epoch: ready.epoch });
    expectStopped(await runner.exit(), ready, 'SIGKILL');
    expect(gone(ready.childPid)).toBe(true);
  });

  it('after a kill -9 of run, recover refuses while its program lives (live), and recovers once it is gone', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const place = box.place(workspace);
    const { runner, ready } = await startRun(box, workspace, ['sh', '-c', `exec ${PYTHON_SERVER}`, workspace]);
    const port = await portOf(runner);
    // `run` dies; its program, in its own process group, does not.
    const killed = new Promise((resolve) => runner.child.once('exit', resolve));
    runner.child.kill('SIGKILL');
    await killed;
    expect(await answers(port)).toBe(200);

    const review = json(await cli(['recover', ...place, '--json']));
    expect(review.ownerStatus).toBe('live');
    expect(review.holders).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ pid: runner.pid, status: 'absent' }),
        expect.objectContaining({ pid: ready.childPid, status: 'live' }),
      ]),
    );
    expect(review.digest).toMatch(DIGEST);
    const before = treeOf(box.stateHome);
    const refused = await cli(['recover', ...place, '--digest', review.digest as string, '--yes', '--json']);
    expect(refused.code).toBe(1);
    expect(json(refused)).toMatchObject({ error: 'quarantine' });
    expect(treeOf(box.stateHome)).toEqual(before);
    expect(await answers(port)).toBe(200);

    process.kill(ready.childPid, 'SIGKILL');
    await untilGone(ready.childPid);
    const again = json(await cli(['recover', ...place, '--json']));
    expect(again.ownerStatus).toBe('absent');
    const recovered = await cli(['recover', ...place, '--digest', again.digest as string, '--yes', '--json']);
    expect(recovered.code).toBe(0);
    expect(json(recovered)).toEqual({ recovered: true });
    expect(await statusOf(box, workspace)).toEqual({ status: 'stopped', root: workspace, epoch: ready.epoch, config: expect.any(Object) });
  });

  it('kills its program and exits 4, touching no file, when its lease is lost', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { runner, ready } = await startRun(box, workspace, ['sh', '-c', `exec ${PYTHON_SERVER}`, workspace], ['--watch-ms', '50']);
    expect(await answers(await portOf(runner))).toBe(200);
    const [service] = box.serviceFolders();
    writeFileSync(join(service!, 'extra.json'), '{}', { mode: 0o600, flag: 'wx' });
    const afterChange = treeOf(box.stateHome);

    const ended = await runner.exit();
    expect(ended.code).toBe(4);
    expect(events(ended.stdout)).toEqual([
      ready,
      { event: 'child-exited', childPid: ready.childPid, code: null, signal: 'SIGTERM' },
      { event: 'lost', epoch: ready.epoch, error: expect.stringMatching(/^(conflict|refused)$/) },
    ]);
    expect(gone(ready.childPid)).toBe(true);
    expect(treeOf(box.stateHome)).toEqual(afterChange);
  });

  it.each([
    { args: ['sh', '-c', 'exit 0'], case: 'without --' },
    { args: ['--'], case: 'with nothing after --' },
  ])('is a usage error $case: exit 2, nothing written', async ({ args }) => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const refused = await cli(['run', ...box.place(workspace), '--json', ...args]);
    expect(refused.code).toBe(2);
    expect(json(refused)).toEqual({ error: 'usage', message: 'run: no program given after --', remedy: 'give it after --, as in: leasehold run -- CMD [ARGS...]' });
    expect(treeOf(box.stateHome)).toEqual({});
  });
});
