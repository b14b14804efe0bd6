import { waitTicketPlaces } from '@leasehold/contracts';
import { namesIn } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cli,
  json,
  jsonLines,
  killAll,
  removeSandboxes,
  sandbox,
  Server,
  type Background,
  type Sandbox,
} from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

afterEach(async () => {
  await killAll();
  removeSandboxes();
  // After every test, alone or not: no capability seen so far is in any output, answer or state file.
  expect(capabilityLeaks()).toEqual([]);
});

/** The `waiting` record of a `serve --wait --json`. */
interface Waiting {
  readonly event: 'waiting';
  readonly ahead: number;
  readonly holder?: { pid: number; host: string; commandLine: string[] | null; since: string };
}

/** The first `waiting` record `waiter` printed, once it has. */
function waitingOf(waiter: Background): Promise<Waiting> {
  // Only whole lines: a record may arrive in more than one chunk.
  return waiter.until(
    (stdout) =>
      jsonLines(stdout.slice(0, stdout.lastIndexOf('\n') + 1)).find((line) => line.event === 'waiting') as
        Waiting | undefined,
    'waiting record',
  );
}

/** Resolves once `waiter`'s stderr matches `pattern`; rejects if it exits first. */
function stderrMatches(waiter: Background, pattern: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    const stderr = waiter.child.stderr!;
    const check = () => {
      if (!pattern.test(waiter.stderr)) return;
      stderr.off('data', check);
      resolve();
    };
    stderr.on('data', check);
    void waiter.exited.then(() => {
      if (pattern.test(waiter.stderr)) resolve();
      else reject(new Error(`exited before stderr matched ${String(pattern)}: ${waiter.stdout}${waiter.stderr}`));
    });
    check();
  });
}

/** The workspace's tickets in `<stateHome>/waiters/` (its staging folder aside). */
function ticketsOf(box: Sandbox, workspace: string): string[] {
  const { folder, prefix } = waitTicketPlaces(workspace, box.stateHome);
  return namesIn(folder).filter((name) => name.startsWith(prefix));
}

/** The message of a wait for `workspace` that a stop signal ended. */
function interrupted(workspace: string): RegExp {
  const escaped = workspace.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${escaped}: stopped \\(\\w+\\) while waiting for its owner; nothing was acquired$`);
}

describe('leasehold serve --wait', () => {
  it("waits behind a live owner naming it, serves with a new epoch once that owner is stopped, and status names the waiter's pid", async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const place = box.place(workspace);
    const { server: first, ready: firstReady } = await box.serve(workspace);
    const waiter = new Server([...place, '--wait', '60s'], {});
    const waiting = await waitingOf(waiter);
    expect(waiting).toEqual({
      event: 'waiting',
      ahead: 0,
      holder: { pid: first.pid, host: expect.any(String), commandLine: expect.any(Array), since: expect.any(String) },
    });
    expect(waiting.holder!.commandLine).toContain('serve');
    expect(ticketsOf(box, workspace)).toHaveLength(1);
    // The owner's status counts the waiter, in JSON and in words.
    const counted = await cli(['status', ...place, '--json']);
    expect(json(counted)).toMatchObject({ status: 'running', pid: first.pid, waiting: 1 });
    expect((await cli(['status', ...place])).stdout).toMatch(/^waiting +1 in line for it, first come, first served$/m);

    // `stop` stops whichever owner holds the workspace: the first one, so the waiter's turn comes.
    const stopped = await cli(['stop', ...place, '--json']);
    expect(stopped.code).toBe(0);
    expect(json(stopped)).toMatchObject({ epoch: firstReady.epoch });
    expect((await first.exit()).code).toBe(0);
    const ready = await waiter.ready();
    box.recordCapabilities();
    expect(ready).toMatchObject({ event: 'ready', pid: waiter.pid });
    expect(ready.epoch).not.toBe(firstReady.epoch);
    expect(ticketsOf(box, workspace)).toEqual([]);
    const running = await cli(['status', ...place, '--json']);
    expect(running.code).toBe(0);
    expect(json(running)).toMatchObject({ status: 'running', epoch: ready.epoch, pid: waiter.pid });
    expect(json(running)).not.toHaveProperty('waiting');

    expect((await cli(['stop', ...place, '--json'])).code).toBe(0);
    const ended = await waiter.exit();
    expect(ended.code).toBe(0);
    expect(jsonLines(ended.stdout).map((line) => line.event)).toEqual(['waiting', 'ready', 'stopped']);
    expect(ended.stderr).toBe('');
  });

  it('SIGINT while waiting: interrupted (exit 130, as a shell tells Ctrl-C) with nothing acquired, no ticket left, and the first owner serves on', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const place = box.place(workspace);
    const { server: first, ready: firstReady } = await box.serve(workspace);
    const waiter = new Server([...place, '--wait', '60s'], {});
    expect((await waitingOf(waiter)).holder?.pid).toBe(first.pid);
    expect(ticketsOf(box, workspace)).toHaveLength(1);

    waiter.child.kill('SIGINT');
    const ended = await waiter.exit();
    expect(ended.code).toBe(130);
    const records = jsonLines(ended.stdout);
    expect(records.map((line) => line.event ?? line.error)).toEqual(['waiting', 'interrupted']);
    expect(records[1]).toEqual({
      error: 'interrupted',
      signal: 'SIGINT',
      message: expect.stringMatching(interrupted(workspace)),
    });
    expect(ended.stderr).toBe('');
    expect(ticketsOf(box, workspace)).toEqual([]);

    // The same for a person: the waiting line, then the error on stderr.
    const human = new Server([...place, '--wait', '60s'], { json: false });
    await stderrMatches(human, /^waiting {3}held by pid /m);
    expect(ticketsOf(box, workspace)).toHaveLength(1);
    human.child.kill('SIGINT');
    const humanEnded = await human.exit();
    expect(humanEnded.code).toBe(130);
    expect(humanEnded.stdout).toBe('');
    const [waitingLine, errorLine] = humanEnded.stderr.split('\n');
    expect(waitingLine).toMatch(/^waiting {3}held by pid /);
    expect(errorLine).toMatch(/^leasehold: interrupted \(SIGINT\): /);
    expect(errorLine!.slice('leasehold: interrupted (SIGINT): '.length)).toMatch(interrupted(workspace));
    expect(ticketsOf(box, workspace)).toEqual([]);

    const running = await cli(['status', ...place, '--json']);
    expect(running.code).toBe(0);
    expect(json(running)).toMatchObject({ status: 'running', epoch: firstReady.epoch, pid: first.pid });
  });

  it('without --json, on a stderr that is no terminal, prints the waiting line once, then serves', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const place = box.place(workspace);
    const { server: first } = await box.serve(workspace);
    const waiter = new Server([...place, '--wait', '60s'], { json: false });
    const line = new RegExp(
      `^waiting   held by pid ${first.pid} on \\S+ \\(.*serve.*\\) since \\S+; waited \\d+ s$`,
      'm',
    );
    await stderrMatches(waiter, line);

    expect((await cli(['stop', ...place, '--json'])).code).toBe(0);
    expect((await first.exit()).code).toBe(0);
    const ready = await waiter.ready();
    box.recordCapabilities();
    expect(ready.pid).toBe(waiter.pid);
    expect((await cli(['stop', ...place, '--json'])).code).toBe(0);
    const ended = await waiter.exit();
    expect(ended.code).toBe(0);
    expect(ended.stderr.split('\n').filter((text) => text !== '')).toEqual([expect.stringMatching(line)]);
    expect(ended.stderr).not.toContain('\r');
  });

  it('refuses a --wait that is no duration: exit 2, a usage error, nothing served', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const refused = await cli(['serve', ...box.place(workspace), '--wait', 'abc', '--json']);
    expect(refused.code).toBe(2);
    expect(json(refused)).toEqual({
      error: 'usage',
      message: '--wait abc: not a duration',
      remedy: 'give --wait a whole number of seconds, or one with ms, s or m, such as --wait 30s',
    });
    const human = await cli(['serve', ...box.place(workspace), '--wait', 'abc']);
    expect(human.code).toBe(2);
    expect(human.stderr).toContain('--wait abc: not a duration');
    expect((await cli(['status', ...box.place(workspace), '--json'])).code).toBe(3);
  });
});
