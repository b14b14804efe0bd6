import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  Background,
  cli,
  httpRequest,
  json,
  jsonLines,
  killAll,
  removeSandboxes,
  sandbox,
  type Ready,
  type Sandbox,
} from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

const OWNER = fileURLToPath(new URL('../test/fixtures/hand-over-owner.mjs', import.meta.url));

afterEach(async () => {
  await killAll();
  removeSandboxes();
  // After every test, alone or not: no capability seen so far is in any output, answer or state file.
  expect(capabilityLeaks()).toEqual([]);
});

/** A daemon with its own hand-over policy (test/fixtures/hand-over-owner.mjs) serving `workspace`, once it serves. */
async function daemon(
  box: Sandbox,
  workspace: string,
  plan: { handOver?: 'release' | 'release-after' | 'refuse'; refuseReason?: string } = {},
): Promise<{ owner: Background; ready: Ready }> {
  const owner = new Background(process.execPath, [
    OWNER,
    JSON.stringify({ workspace, stateHome: box.stateHome, ...plan }),
  ]);
  const ready = await owner.until(
    (stdout) => jsonLines(stdout).find((line) => line.event === 'ready') as Ready | undefined,
    'ready',
  );
  box.recordCapabilities();
  return { owner, ready };
}

/** The events the daemon printed, each line as an object. */
function eventsOf(owner: Background): Array<Record<string, unknown>> {
  return jsonLines(owner.stdout);
}

describe('leasehold stop --ask', () => {
  it("refused: prints the owner's reason, exits 1 (conflict) with a remedy, and the owner serves on", async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { owner, ready } = await daemon(box, workspace, {
      handOver: 'refuse',
      refuseReason: 'indexing the monorepo, about 3 minutes left',
    });
    const asked = await cli([
      'stop',
      '--ask',
      '--reason',
      'the nightly build needs it',
      ...box.place(workspace),
      '--json',
    ]);
    expect(asked.code).toBe(1);
    expect(json(asked)).toEqual({
      error: 'conflict',
      message: `${workspace}: its owner refused to hand it over: indexing the monorepo, about 3 minutes left`,
      remedy: `wait until the owner is done and ask again, or stop it regardless: leasehold stop --workspace ${workspace} --state-home ${box.stateHome}`,
    });
    const human = await cli(['stop', '--ask', ...box.place(workspace)]);
    expect(human.code).toBe(1);
    expect(human.stdout).toBe('');
    expect(human.stderr).toBe(
      `leasehold: conflict: ${workspace}: its owner refused to hand it over: indexing the monorepo, about 3 minutes left\n` +
        `  wait until the owner is done and ask again, or stop it regardless: leasehold stop --workspace ${workspace} --state-home ${box.stateHome}\n`,
    );
    expect(eventsOf(owner).filter((line) => line.event === 'asked')).toEqual([
      { event: 'asked', request: { reason: 'the nightly build needs it' } },
      { event: 'asked', request: {} },
    ]);
    // Still the owner, with no hand-over pending: a refusal is not kept.
    const status = await cli(['status', ...box.place(workspace), '--json']);
    expect(status.code).toBe(0);
    expect(json(status)).toMatchObject({ status: 'running', epoch: ready.epoch, pid: owner.pid });
    expect(json(status)).not.toHaveProperty('handOver');
    expect(owner.child.exitCode).toBeNull();
  });

  it('released: the owner stops, stop --ask waits until the workspace reads stopped, and says so', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { owner, ready } = await daemon(box, workspace, { handOver: 'release' });
    const asked = await cli(['stop', '--ask', ...box.place(workspace), '--json']);
    expect(asked.code).toBe(0);
    expect(jsonLines(asked.stdout)).toEqual([
      { decision: 'release', root: workspace, epoch: ready.epoch },
      { stopped: true, root: workspace, epoch: ready.epoch },
    ]);
    expect((await owner.exit()).code).toBe(0);
    expect(eventsOf(owner).at(-1)).toEqual({ event: 'stopped', outcome: { reason: 'stop' } });
    const status = await cli(['status', ...box.place(workspace), '--json']);
    expect(json(status)).toMatchObject({ status: 'stopped', epoch: ready.epoch });
  });

  it('release-after: said at once, shown by status, and stop --ask ends once the owner finished its work and stopped', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { owner, ready } = await daemon(box, workspace, { handOver: 'release-after' });
    const asking = new Background(process.execPath, [
      fileURLToPath(new URL('../dist/leasehold.cjs', import.meta.url)),
      'stop',
      '--ask',
      '--reason',
      'the nightly build needs it',
      ...box.place(workspace),
    ]);
    await asking.until((stdout) => (stdout.includes('asked ') ? true : undefined), 'the decision');
    expect(asking.stdout).toBe(
      `asked     ${workspace}: its owner hands it over after its current work; waiting for it\n`,
    );
    // Accepted, not yet released: status shows the hand-over, in both modes.
    const status = await cli(['status', ...box.place(workspace), '--json']);
    expect(status.code).toBe(0);
    expect(json(status)).toMatchObject({
      status: 'running',
      epoch: ready.epoch,
      handOver: { asked: true, reason: 'the nightly build needs it', decision: 'release-after' },
    });
    const human = await cli(['status', ...box.place(workspace)]);
    expect(human.stdout).toMatch(
      /\nhand-over +asked: releases after its current work \(reason: the nightly build needs it\)\n/,
    );
    expect(eventsOf(owner).some((line) => line.event === 'stopped')).toBe(false);
    // The work it was doing ends (an authenticated request of the test): then it releases, and stop --ask ends.
    const { capability } = box.capabilities()[0]!;
    const finished = await httpRequest(ready.endpoint, 'POST', '/finish', {
      host: new URL(ready.endpoint).host,
      authorization: `Bearer ${capability}`,
    });
    expect(finished.status).toBe(200);
    const ended = await asking.exit();
    expect(ended.code).toBe(0);
    expect(ended.stdout.split('\n').slice(1)).toEqual([`stopped   ${workspace}`, '']);
    expect((await owner.exit()).code).toBe(0);
    expect(eventsOf(owner).map((line) => line.event)).toEqual(['ready', 'asked', 'work-done', 'stopped']);
    expect(json(await cli(['status', ...box.place(workspace), '--json']))).toMatchObject({
      status: 'stopped',
      epoch: ready.epoch,
    });
  });

  it('an owner without onHandOverRequested releases; leasehold serve releases too, and shows the asker its reason', async () => {
    const box = sandbox();
    const first = box.workspace('daemon');
    const { owner, ready } = await daemon(box, first);
    const asked = await cli(['stop', '--ask', ...box.place(first)]);
    expect(asked.code).toBe(0);
    expect(asked.stdout).toBe(`asked     ${first}: its owner hands it over now\nstopped   ${first}\n`);
    expect((await owner.exit()).code).toBe(0);
    expect(eventsOf(owner).map((line) => line.event)).toEqual(['ready', 'stopped']);
    expect(ready.pid).toBe(owner.pid);

    const second = box.workspace('served');
    const { server, ready: served } = await box.serve(second);
    const again = await cli(['stop', '--ask', '--reason', 'mine now', ...box.place(second), '--json']);
    expect(again.code).toBe(0);
    expect(jsonLines(again.stdout)).toEqual([
      { decision: 'release', root: second, epoch: served.epoch },
      { stopped: true, root: second, epoch: served.epoch },
    ]);
    const ended = await server.exit();
    expect(ended.code).toBe(0);
    // The owner's side: the request, with its reason, before the stop (a JSON event; a line for a person).
    expect(jsonLines(ended.stdout)).toEqual([
      served,
      { event: 'hand-over', reason: 'mine now' },
      { event: 'stopped', epoch: served.epoch },
    ]);
    const third = box.workspace('for-a-person');
    const { server: human } = await box.serve(third, [], false);
    expect((await cli(['stop', '--ask', '--reason', 'my turn', ...box.place(third)])).code).toBe(0);
    const humanEnded = await human.exit();
    expect(humanEnded.stdout).toContain(`asked     to hand ${third} over (reason: my turn); releasing\n`);
  });

  it('a hand-over request without the capability is 401, one with a malformed body 400: the owner is not asked, and serves on', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { owner, ready } = await daemon(box, workspace, { handOver: 'release' });
    const { capability } = box.capabilities()[0]!;
    const host = new URL(ready.endpoint).host;
    const contentType = { 'content-type': 'application/json' };
    const unauthorised = await httpRequest(
      ready.endpoint,
      'POST',
      '/v1/hand-over',
      { host, ...contentType },
      undefined,
      '{}',
    );
    expect(unauthorised.status).toBe(401);
    for (const body of ['{"reason":', '{"reason":"mine","force":true}', '{"reason":"\\u001b[2J"}']) {
      const malformed = await httpRequest(
        ready.endpoint,
        'POST',
        '/v1/hand-over',
        { host, authorization: `Bearer ${capability}`, ...contentType },
        undefined,
        body,
      );
      expect({ body, status: malformed.status }).toEqual({ body, status: 400 });
    }
    expect(eventsOf(owner).map((line) => line.event)).toEqual(['ready']);
    const status = await cli(['status', ...box.place(workspace), '--json']);
    expect(status.code).toBe(0);
    expect(json(status)).not.toHaveProperty('handOver');
  });

  it('of a workspace not running: said so at once (exit 0), as stop does', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const asked = await cli(['stop', '--ask', ...box.place(workspace), '--json']);
    expect(asked.code).toBe(0);
    expect(json(asked)).toEqual({ stopped: true, root: workspace, epoch: null });
  });

  it('usage errors (exit 2), with nothing asked: --reason without --ask, a reason that is not one printable line of 1 to 200', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { owner } = await daemon(box, workspace, { handOver: 'release' });
    const cases: Array<[string[], string]> = [
      [['--reason', 'mine'], '--reason: only with --ask (a stop gives the owner no say)'],
      [['--ask', '--reason='], '--reason: 0 characters, not 1 to 200'],
      [['--ask', '--reason', 'x'.repeat(201)], '--reason: 201 characters, not 1 to 200'],
      [
        ['--ask', '--reason', 'two\nlines'],
        '--reason: holds a control or format character (a newline, an escape, ...)',
      ],
    ];
    for (const [options, message] of cases) {
      const result = await cli(['stop', ...options, ...box.place(workspace), '--json']);
      expect({ options, code: result.code, message: json(result).message }).toEqual({ options, code: 2, message });
      expect(json(result)).toMatchObject({ error: 'usage' });
    }
    expect(eventsOf(owner).map((line) => line.event)).toEqual(['ready']);
    expect((await cli(['status', ...box.place(workspace)])).code).toBe(0);
  });
});
