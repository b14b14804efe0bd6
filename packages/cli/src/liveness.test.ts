import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, killUnreaped, rewriteJson, spawnCommand, spawnUnreaped } from '@leasehold/test-utils';
import {
  BIN,
  cleanEnv,
  cli,
  json,
  killAll,
  processStartOf,
  removeSandboxes,
  sandbox,
  type Sandbox,
} from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

// Every command judges an owner's process by the same proof as the backend (pid, start time, boot,
// PID namespace: OwnerSummary's `process`), so `status`, `list`, `recover` and `stop` never disagree
// about whether it is gone, and none says why it went.

afterEach(async () => {
  await killAll();
  await cleanUp();
  removeSandboxes();
  expect(capabilityLeaks()).toEqual([]);
});

/** What each command says of the workspace's owner's process, in its own terms. */
async function verdicts(box: Sandbox, workspace: string) {
  const status = await cli(['status', ...box.place(workspace), '--json']);
  const person = await cli(['status', ...box.place(workspace)]);
  const listed = json(await cli(['list', '--state-home', box.stateHome, '--json'])).entries as Array<
    Record<string, unknown>
  >;
  const review = json(await cli(['recover', ...box.place(workspace), '--json']));
  const stop = await cli(['stop', ...box.place(workspace), '--json']);
  return {
    status: { code: status.code, ...json(status) },
    person: person.stdout,
    listed,
    review,
    stop: { code: stop.code, ...json(stop) },
  };
}

/** The verdict of a gone owner `pid` of `workspace`: every command says its process is gone, none that it crashed. */
function expectGone(seen: Awaited<ReturnType<typeof verdicts>>, box: Sandbox, workspace: string, pid: number): void {
  expect(seen.status).toMatchObject({
    code: 3,
    status: 'unavailable',
    pid,
    reasonCode: 'owner-gone',
    reason: `its owner (pid ${pid}) does not answer: its process is gone`,
  });
  expect(seen.person).toContain(
    `Its owner's process is gone; review what it left with: leasehold recover --workspace ${workspace} --state-home ${box.stateHome}`,
  );
  expect(seen.person).not.toMatch(/still there|crash/);
  expect(seen.listed).toEqual([
    expect.objectContaining({
      root: workspace,
      pid,
      status: 'unavailable',
      reasonCode: 'owner-gone',
      ownerStatus: 'absent',
    }),
  ]);
  expect(seen.review).toMatchObject({
    ownerStatus: 'absent',
    holders: [expect.objectContaining({ pid, status: 'absent' })],
  });
  expect(seen.stop).toMatchObject({
    code: 1,
    error: 'quarantine',
    message: expect.stringContaining(`pid ${pid} on host`),
  });
  expect(seen.stop).toMatchObject({ message: expect.stringContaining('(absent), is gone: there is nothing to stop') });
}

describe("an owner's process, judged by every command as the backend judges it", () => {
  it('a zombie (killed, never reaped by its parent): status, list, recover and stop all say it is gone, and the recovery they name works', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { parent, pid } = await spawnUnreaped(process.execPath, [BIN, 'serve', '--json', ...box.place(workspace)], {
      env: cleanEnv(),
    });
    await parent.line((line) => line.includes('"event":"ready"'));
    box.recordCapabilities();
    await killUnreaped(pid);
    // kill(pid, 0) still finds a zombie: a pid-only judgement would call it there.
    expect(process.kill(pid, 0)).toBe(true);

    const seen = await verdicts(box, workspace);
    expectGone(seen, box, workspace, pid);
    const recovered = await cli([
      'recover',
      ...box.place(workspace),
      '--digest',
      String(seen.review.digest),
      '--yes',
      '--json',
    ]);
    expect(json(recovered)).toEqual({ recovered: true });
    expect(json(await cli(['status', ...box.place(workspace), '--json']))).toMatchObject({ status: 'stopped' });
  });

  it('a reused pid (its fences name a live process, with another start time): status and list say it is gone', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server } = await box.serve(workspace);
    await server.kill9();
    // A live process of this host stands where the owner's pid was; the fences keep the owner's start time.
    const stranger = spawnCommand('sleep', ['1000']);
    const [boot, namespace, startTime] = processStartOf(stranger.pid).split(':').slice(1);
    const owners = { pid: stranger.pid, processStart: `linux:${boot}:${namespace}:${BigInt(startTime!) - 1n}` };
    const service = box.serviceFolders()[0]!;
    rewriteJson(join(box.namespace, 'registry', 'roots.json'), (table) => ({
      ...table,
      entries: (table.entries as object[]).map((row) => ({ ...row, ...owners })),
    }));
    for (const file of [
      join(service, 'registration.json'),
      join(dirname(service), 'checkout.lock'),
      join(workspace, '.leasehold', 'owner.json'),
    ])
      rewriteJson(file, (document) => ({ ...document, ...owners }));
    rewriteJson(join(service, 'owner.lock'), (document) => ({ ...document, pid: stranger.pid }));

    expectGone(await verdicts(box, workspace), box, workspace, stranger.pid);
    expect(process.kill(stranger.pid, 0)).toBe(true);
  });
});
