import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';
import { rewriteJson, treeOf, untilGone } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  BIN,
  Background,
  cli,
  httpRequest,
  json,
  killAll,
  removeSandboxes,
  sandbox,
  type Result,
  type Sandbox,
  onLocalDisk,
} from '../test/helpers.js';
import { capabilityLeaks, transcript } from '../test/transcript.js';

const ENDPOINT = /^http:\/\/127\.0\.0\.1:[1-9][0-9]*$/;
const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DIGEST = /^[0-9a-f]{64}$/;

/** A program no one here wrote: Python's own HTTP server, on a free port it picks, announcing it unbuffered. */
const PYTHON_SERVER = 'python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$0"';

/** Every program `run` announced, so that none outlives its test. */
const programs = new Set<number>();
/** Every watcher `run` started, so that none outlives its test either (it ignores SIGTERM). */
const watchers = new Set<number>();

afterEach(async () => {
  await killAll();
  await killPrograms();
  await killWatchers();
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

/** A file in the sandbox that no one may execute (not even root: no execute bit at all). */
function notExecutable(box: Sandbox): string {
  const path = join(box.folder, 'not-executable');
  writeFileSync(path, 'echo never\n', { mode: 0o644 });
  return path;
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

/** SIGKILL to every watcher still there, and a wait until each is gone. */
async function killWatchers(): Promise<void> {
  for (const pid of watchers) {
    try {
      if (!gone(pid)) process.kill(pid, 'SIGKILL');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
    await untilGone(pid);
  }
  watchers.clear();
}

/** What `find` finds, polled until it finds something; bounded, so that a process that never comes fails its test. */
async function untilFound<T>(find: () => T | undefined, what: string): Promise<T> {
  for (let tries = 0; ; tries += 1) {
    const found = find();
    if (found !== undefined) return found;
    if (tries > 3000) throw new Error(`no ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The processes `pid` started and that have not ended yet, from every thread's /proc children list. */
function childrenOf(pid: number): number[] {
  const threads = readdirSync(`/proc/${pid}/task`);
  return threads.flatMap((thread) =>
    readFileSync(`/proc/${pid}/task/${thread}/children`, 'utf8').split(' ').filter(Boolean).map(Number),
  );
}

/** The `sleep 1000` process `pid` started, once it runs as such (a forked shell shows the shell's command line until it execs). */
function startedSleep(pid: number): Promise<number> {
  const isSleep = (child: number) => readFileSync(`/proc/${child}/cmdline`, 'utf8') === 'sleep\u00001000\u0000';
  return untilFound(() => childrenOf(pid).find(isSleep), `sleep 1000 started by pid ${pid}`);
}

/** Field `index` of /proc/<pid>/stat counted from the state (field 3), past the command name. */
function statField(pid: number, index: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[index]!;
}

/**
 * `run`'s watcher, while `run` and its program run: the one other process `run` started, a shell
 * named leasehold-run-watcher, in a process group (a session) of its own, not `run`'s.
 * (It ends soon after its program: ask only while the program runs.)
 */
function watcherOf(runner: Background, ready: RunReady): number {
  const others = childrenOf(runner.pid).filter((pid) => pid !== ready.childPid);
  expect(others).toHaveLength(1);
  const watcher = others[0]!;
  expect(readFileSync(`/proc/${watcher}/cmdline`, 'utf8').split('\0')).toContain('leasehold-run-watcher');
  // Field 5, the process group: its own, so a signal to `run`'s group does not reach it.
  expect(statField(watcher, 2)).toBe(String(watcher));
  watchers.add(watcher);
  return watcher;
}

/** Whether `pid` ignores each of `signals`, from the SigIgn mask of /proc/<pid>/status. */
function ignores(pid: number, signals: readonly NodeJS.Signals[]): boolean {
  const mask = BigInt(`0x${/^SigIgn:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]!}`);
  return signals.every((signal) => (mask >> BigInt(constants.signals[signal] - 1)) & 1n);
}

/** `leasehold run --json` on `workspace` with `program`, once its program may act. */
async function startRun(
  box: Sandbox,
  workspace: string,
  program: readonly string[],
  extra: readonly string[] = [],
): Promise<{ runner: Background; ready: RunReady }> {
  const runner = new Background(process.execPath, [
    BIN,
    'run',
    '--json',
    ...box.place(workspace),
    ...extra,
    '--',
    ...program,
  ]);
  const ready = await runner.until(
    (stdout) => events(stdout).find((event) => event.event === 'ready') as RunReady | undefined,
    'ready line',
  );
  programs.add(ready.childPid);
  box.recordCapabilities();
  return { runner, ready };
}

/**
 * `run` and its watcher killed with SIGKILL (the watcher first: it would end the program once
 * `run` is gone), as `kill -9` of both would leave them: the program lives on, fenced, alone.
 */
async function orphaned(runner: Background, watcher: number): Promise<void> {
  process.kill(watcher, 'SIGKILL');
  await untilGone(watcher);
  // Its exit, not its output's end: the program still holds `run`'s stdout and stderr.
  const killed = new Promise((resolve) => runner.child.once('exit', resolve));
  runner.child.kill('SIGKILL');
  await killed;
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
    const { runner, ready } = await startRun(box, workspace, [
      'sh',
      '-c',
      `env > "$1"; exec ${PYTHON_SERVER}`,
      workspace,
      envFile,
    ]);
    expect(ready).toEqual({
      event: 'ready',
      endpoint: expect.stringMatching(ENDPOINT),
      epoch: expect.stringMatching(ID),
      pid: runner.pid,
      childPid: expect.any(Number),
    });
    expect(ready.childPid).not.toBe(runner.pid);

    expect(await statusOf(box, workspace)).toEqual({
      status: 'running',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch: ready.epoch,
      endpoint: ready.endpoint,
      pid: runner.pid,
      capabilityFile: expect.stringMatching(/\/service\/local-capability\.json$/),
      config: expect.any(Object),
    });
    expect(await answers(await portOf(runner))).toBe(200);

    const environment = readFileSync(envFile, 'utf8');
    transcript.push(environment);
    const leasehold = environment
      .split('\n')
      .filter((line) => line.startsWith('LEASEHOLD_'))
      .sort();
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
    expect(await statusOf(box, workspace)).toEqual({
      status: 'stopped',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch: ready.epoch,
      config: expect.any(Object),
    });
  });

  it.each([
    { program: 'exit 7', status: 7, exit: { code: 7, signal: null } },
    { program: 'kill -9 $$', status: 137, exit: { code: null, signal: 'SIGKILL' } },
  ])(
    'exits $status when its program runs `$program` by itself, and releases first',
    async ({ program, status, exit }) => {
      const box = sandbox();
      const workspace = box.workspace('ws');
      const { runner, ready } = await startRun(box, workspace, ['sh', '-c', program]);
      const ended = await runner.exit();
      expect(ended.code).toBe(status);
      expect(events(ended.stdout)).toEqual([
        ready,
        { event: 'child-exited', childPid: ready.childPid, ...exit },
        { event: 'stopped', epoch: ready.epoch },
      ]);
      expect(await statusOf(box, workspace)).toEqual({
        status: 'stopped',
        ...onLocalDisk(box.stateHome),
        root: workspace,
        epoch: ready.epoch,
        config: expect.any(Object),
      });
    },
  );

  it('stops its program, then the workspace, on SIGHUP (a closed terminal), and exits 0', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { runner, ready } = await startRun(box, workspace, ['sh', '-c', `exec ${PYTHON_SERVER}`, workspace]);
    expect(await answers(await portOf(runner))).toBe(200);
    runner.child.kill('SIGHUP');
    expectStopped(await runner.exit(), ready, 'SIGTERM');
    expect(gone(ready.childPid)).toBe(true);
    expect(await statusOf(box, workspace)).toEqual({
      status: 'stopped',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch: ready.epoch,
      config: expect.any(Object),
    });
  });

  it('sends SIGKILL to a program that ignores SIGTERM once --stop-timeout has passed', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    // An ignored signal stays ignored across exec: python never sees the SIGTERM.
    const { runner, ready } = await startRun(
      box,
      workspace,
      ['sh', '-c', `trap "" TERM; exec ${PYTHON_SERVER}`, workspace],
      ['--stop-timeout', '1'],
    );
    expect(await answers(await portOf(runner))).toBe(200);
    expect(json(await cli(['stop', ...box.place(workspace), '--json']))).toEqual({
      stopped: true,
      root: workspace,
      epoch: ready.epoch,
    });
    expectStopped(await runner.exit(), ready, 'SIGKILL');
    expect(gone(ready.childPid)).toBe(true);
  });

  it("after a kill -9 of run alone, its watcher (deaf to the signals of a group) ends the program's group, the program and what it started, and run --recover-dead serves again", async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { runner, ready } = await startRun(box, workspace, ['sh', '-c', 'sleep 1000 & wait']);
    const watcher = watcherOf(runner, ready);
    const started = await startedSleep(ready.childPid);
    // The signals a terminal or a supervisor sends a group do not end the watcher: once it ignores them, they are dropped.
    const groupSignals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];
    await untilFound(
      () => (ignores(watcher, groupSignals) ? true : undefined),
      'watcher ignoring SIGINT, SIGTERM, SIGHUP and SIGQUIT',
    );
    for (const signal of groupSignals) process.kill(watcher, signal);

    await runner.kill9();
    // Nobody else acts: the watcher sees `run` gone, sends SIGTERM to the program's group, and ends.
    await untilGone(ready.childPid);
    await untilGone(started);
    await untilGone(watcher);

    const again = await startRun(box, workspace, ['sleep', '1000'], ['--recover-dead']);
    expect(again.ready.epoch).not.toBe(ready.epoch);
    const againWatcher = watcherOf(again.runner, again.ready);
    expect(json(await cli(['stop', ...box.place(workspace), '--json']))).toEqual({
      stopped: true,
      root: workspace,
      epoch: again.ready.epoch,
    });
    const ended = await again.runner.exit();
    // It said what it recovered first: both processes the fences named, run and its program, proved gone.
    const [recovered, ...rest] = events(ended.stdout);
    const proved = [ready.pid, ready.childPid].map((pid) =>
      expect.objectContaining({ holder: expect.objectContaining({ pid }), by: 'pid-and-start-time' }),
    );
    expect(recovered).toMatchObject({ event: 'recovered', root: workspace, proved: expect.arrayContaining(proved) });
    expect(rest).toEqual([
      again.ready,
      { event: 'child-exited', childPid: again.ready.childPid, code: null, signal: 'SIGTERM' },
      { event: 'stopped', epoch: again.ready.epoch },
    ]);
    // Told the program ended, the watcher ends too, signalling nothing.
    await untilGone(againWatcher);
  });

  it('names a program that outlived run and its watcher (kill -9 of both) in status, list, recover and doctor, with `leasehold stop`, which ends it; then recover recovers', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const place = box.place(workspace);
    const stopCommand = `leasehold stop --workspace ${workspace} --state-home ${box.stateHome}`;
    // It ignores SIGTERM, and so does what it starts (an ignored signal stays ignored across exec).
    const commandLine = ['sh', '-c', 'trap "" TERM; sleep 1000 & wait'];
    const { runner, ready } = await startRun(box, workspace, commandLine);
    const watcher = watcherOf(runner, ready);
    const started = await startedSleep(ready.childPid);
    await orphaned(runner, watcher);
    const program = { pid: ready.childPid, commandLine, processGroup: ready.childPid };
    const inWords = `pid ${ready.childPid}: sh -c 'trap "" TERM; sleep 1000 & wait' (process group ${ready.childPid})`;

    expect(await statusOf(box, workspace)).toMatchObject({
      status: 'unavailable',
      pid: runner.pid,
      reasonCode: 'program-outlives-owner',
      program,
    });
    const status = await cli(['status', ...place]);
    expect(status.code).toBe(3);
    expect(
      status.stdout
        .split('\n')
        .find((line) => line.startsWith('program '))
        ?.replace(/^program +/, ''),
    ).toBe(inWords);
    expect(status.stdout.trimEnd().split('\n').at(-1)).toBe(
      `Its owner's process is gone, but the program it ran lives on; end it with: ${stopCommand}`,
    );

    expect(json(await cli(['list', '--state-home', box.stateHome, '--json'])).entries).toEqual([
      expect.objectContaining({
        root: workspace,
        status: 'unavailable',
        reasonCode: 'program-outlives-owner',
        program,
      }),
    ]);
    expect((await cli(['list', '--state-home', box.stateHome])).stdout).toContain(
      `\n${workspace}: its owner is gone, but the program it fenced the workspace with lives on: ${inWords}\n  end it with: ${stopCommand}\n`,
    );

    const review = json(await cli(['recover', ...place, '--json']));
    expect(review).toMatchObject({ ownerStatus: 'live', program, digest: expect.stringMatching(DIGEST) });
    expect(review.holders).toEqual([
      expect.objectContaining({ pid: runner.pid, status: 'absent' }),
      expect.objectContaining({ pid: ready.childPid, status: 'live', fences: ['companion'] }),
    ]);
    const reviewed = await cli(['recover', ...place]);
    // A review whose recovery would be refused says so by its exit status too.
    expect(reviewed.code).toBe(3);
    const human = reviewed.stdout;
    expect(human).toContain(
      `: live, the program its gone owner ran: sh -c 'trap "" TERM; sleep 1000 & wait' (process group ${ready.childPid})\n`,
    );
    expect(human.trimEnd().split('\n').at(-1)).toBe(
      `The program its gone owner ran lives on, so recovery would be refused; end it with: ${stopCommand}`,
    );
    const before = treeOf(box.stateHome);
    const refused = await cli(['recover', ...place, '--digest', review.digest as string, '--yes', '--json']);
    expect(refused.code).toBe(1);
    expect(json(refused)).toEqual({
      error: 'quarantine',
      message: `${workspace}: the program its gone owner fenced it with lives on: ${inWords}; nothing changed`,
      remedy: `end it with: ${stopCommand}`,
    });
    expect(treeOf(box.stateHome)).toEqual(before);

    const doctor = await cli(['doctor', '--state-home', box.stateHome, '--json']);
    expect(doctor.code).toBe(3);
    expect(json(doctor).findings).toEqual([
      {
        kind: 'outliving-program',
        file: join(box.serviceFolders()[0]!, 'companion.json'),
        workspace,
        problem: expect.stringContaining(`lives on: pid ${ready.childPid} on `) as unknown,
        fix: stopCommand,
      },
    ]);
    expect((json(doctor).findings as Array<{ problem: string }>)[0]!.problem).toContain(
      `started as ${JSON.stringify(commandLine)}, in process group ${ready.childPid}`,
    );
    expect(gone(ready.childPid) || gone(started)).toBe(false);

    // The command status suggests, as printed (with a short --stop-timeout): SIGTERM is ignored, SIGKILL is not.
    const stop = await box.shell(`${stopCommand} --stop-timeout 1 --json`);
    expect(stop.code).toBe(0);
    expect(json(stop)).toEqual({ stopped: false, root: workspace, program: { ...program, endedBy: 'SIGKILL' } });
    await untilGone(ready.childPid);
    await untilGone(started);

    const after = json(await cli(['recover', ...place, '--json']));
    expect(after.ownerStatus).toBe('absent');
    expect(after.program).toBeUndefined();
    expect(json(await cli(['recover', ...place, '--digest', after.digest as string, '--yes', '--json']))).toEqual({
      recovered: true,
    });
    expect(await statusOf(box, workspace)).toEqual({
      status: 'stopped',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch: ready.epoch,
      config: expect.any(Object),
    });
  });

  it("never signals a pid whose start time is not the fence's (a reused pid): stop says so and leaves that process alone", async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { runner, ready } = await startRun(box, workspace, ['sleep', '1000']);
    await orphaned(runner, watcherOf(runner, ready));
    // The fence now names the program's pid with another start time: as if the program had ended and its pid been given to this process.
    rewriteJson(join(box.serviceFolders()[0]!, 'companion.json'), (companion) => {
      const [kind, boot, namespace, start] = String(companion.processStart).split(':');
      companion.processStart = `${kind}:${boot}:${namespace}:${Number(start) + 1}`;
    });

    const stop = await cli(['stop', ...box.place(workspace), '--stop-timeout', '0', '--json']);
    expect(stop.code).toBe(1);
    expect(json(stop)).toEqual({
      error: 'quarantine',
      message: `${workspace}: its owner's process is gone, and the program it fenced the workspace with (pid ${ready.childPid}) is gone: pid ${ready.childPid} now names another process (another start time), which stop leaves alone`,
      remedy: `review and release what the owner left with: leasehold recover --workspace ${workspace} --state-home ${box.stateHome}`,
    });
    expect(gone(ready.childPid)).toBe(false);
    expect(json(await cli(['status', ...box.place(workspace), '--json']))).not.toHaveProperty('program');
  });

  it.each([
    { status: 127, case: 'not found', program: () => '/no/such/program', says: /\/no\/such\/program: .*not found/ },
    {
      status: 126,
      case: 'not executable',
      program: (box: Sandbox) => notExecutable(box),
      says: /not-executable: .*Permission denied/,
    },
  ])(
    'exits $status, as a shell does, when its program is $case (the shell says so), and releases first',
    async ({ status, program, says }) => {
      const box = sandbox();
      const workspace = box.workspace('ws');
      const { runner, ready } = await startRun(box, workspace, [program(box)]);
      const ended = await runner.exit();
      expect(ended.code).toBe(status);
      expect(ended.stderr).toMatch(says);
      expect(events(ended.stdout)).toEqual([
        ready,
        { event: 'child-exited', childPid: ready.childPid, code: status, signal: null },
        { event: 'stopped', epoch: ready.epoch },
      ]);
      expect(await statusOf(box, workspace)).toEqual({
        status: 'stopped',
        ...onLocalDisk(box.stateHome),
        root: workspace,
        epoch: ready.epoch,
        config: expect.any(Object),
      });
    },
  );

  it('kills its program and exits 4, touching no file, when its lease is lost', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { runner, ready } = await startRun(
      box,
      workspace,
      ['sh', '-c', `exec ${PYTHON_SERVER}`, workspace],
      ['--watch-ms', '50'],
    );
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
    expect(json(refused)).toEqual({
      error: 'usage',
      message: 'run: no program given after --',
      remedy: 'give it after --, as in: leasehold run -- CMD [ARGS...]',
    });
    expect(treeOf(box.stateHome)).toEqual({});
  });
});
