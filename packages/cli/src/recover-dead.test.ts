import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { treeOf } from '@leasehold/test-utils';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import {
  BIN,
  Background,
  cli,
  json,
  jsonLines,
  killAll,
  removeSandboxes,
  sandbox,
  type Ready,
  type Sandbox,
} from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

const DIGEST = /^[0-9a-f]{64}$/;

afterEach(async () => {
  await killAll();
  removeSandboxes();
  expect(capabilityLeaks()).toEqual([]);
});

/** The state home's recovery journal folder. */
function journalFolder(box: Sandbox): string {
  return join(box.stateHome, 'v1', 'journal');
}

/** Every record of the state home's recovery journal, decoded. */
function journalRecords(box: Sandbox): Array<Record<string, unknown>> {
  const journal = journalFolder(box);
  if (!existsSync(journal)) return [];
  return readdirSync(journal).map(
    (file) => JSON.parse(readFileSync(join(journal, file), 'utf8')) as Record<string, unknown>,
  );
}

/** The path of the journal's one record. */
function onlyRecordPath(box: Sandbox): string {
  const [file, ...others] = readdirSync(journalFolder(box));
  expect(others).toEqual([]);
  return join(journalFolder(box), file!);
}

/** The state home's files as a refusal must leave them (a refused start takes and drops the registry lock: folder times move). */
function filesOf(box: Sandbox): ReturnType<typeof treeOf> {
  return treeOf(box.stateHome, { folderTimes: false });
}

/** SIGKILL to process group `pid`, unless it is gone already. */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** Serves `workspace`, then kills the server with SIGKILL (reaped): a crashed owner whose process is gone. */
async function crashedOwner(box: Sandbox, workspace: string): Promise<Ready> {
  const { server, ready } = await box.serve(workspace);
  await server.kill9();
  return ready;
}

describe('serve --recover-dead: a crash restarted without a person, only when the owner is proved dead', () => {
  it('recovers an owner proved gone (journalled as automatic, with its proof), then serves', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const crashed = await crashedOwner(box, workspace);

    const { server, ready } = await box.serve(workspace, ['--recover-dead']);
    expect(ready.epoch).not.toBe(crashed.epoch);
    expect(json(await cli(['status', ...box.place(workspace), '--json']))).toMatchObject({
      status: 'running',
      epoch: ready.epoch,
      pid: server.pid,
    });

    const [record, ...others] = journalRecords(box);
    expect(others).toEqual([]);
    expect(record).toMatchObject({
      root: workspace,
      digest: expect.stringMatching(DIGEST),
      operator: { pid: server.pid, host: hostname() },
      automatic: {
        reason: 'owner-proved-dead',
        proved: [
          {
            holder: { pid: crashed.pid, host: hostname(), processStart: expect.stringMatching(/^linux:/) },
            by: 'pid-and-start-time',
          },
        ],
      },
    });
    // `leasehold journal` reads it back, for a script and for a person: automatic, and who was proved gone.
    const journal = json(await cli(['journal', '--state-home', box.stateHome, '--json']));
    expect(journal.entries).toEqual([
      expect.objectContaining({ root: workspace, digest: record!.digest, automatic: record!.automatic }),
    ]);
    const human = await cli(['journal', '--state-home', box.stateHome]);
    expect(human.stdout).toContain(
      `automatically by root (pid ${server.pid} on host ${hostname()}): proved gone pid ${crashed.pid} on host ${hostname()} (by pid-and-start-time)`,
    );
    // The server said so itself, before it served: the same proof, and where the record is.
    expect(jsonLines(server.stdout)).toEqual([
      {
        event: 'recovered',
        root: workspace,
        proved: (record!.automatic as { proved: unknown }).proved,
        record: onlyRecordPath(box),
      },
      ready,
    ]);
    await cli(['stop', ...box.place(workspace)]);
    expect((await server.exit()).code).toBe(0);
  });

  it('run --recover-dead tells a person what it recovered, then serves its program', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const crashed = await crashedOwner(box, workspace);

    const runner = new Background(process.execPath, [
      BIN,
      'run',
      ...box.place(workspace),
      '--recover-dead',
      '--',
      'sleep',
      '1000',
    ]);
    await runner.until((stdout) => (/^Stop it with /m.test(stdout) ? true : undefined), 'the ready table');
    box.recordCapabilities();
    // Its program runs in a process group of its own: a failing test ends it too.
    const program = Number(/^child pid +(\d+)$/m.exec(runner.stdout)?.[1]);
    onTestFinished(() => killGroup(program));
    const [recovered, proved, record, blank, serving] = runner.stdout.split('\n');
    expect([recovered, proved, record, blank, serving]).toEqual([
      `recovered    ${workspace}`,
      `proved gone  pid ${crashed.pid} on host ${hostname()} (by pid-and-start-time)`,
      `record       ${onlyRecordPath(box)}`,
      '',
      `serving    ${workspace}`,
    ]);
    expect((await cli(['stop', ...box.place(workspace)])).code).toBe(0);
    expect((await runner.exit()).code).toBe(0);
  });

  it('without the flag a crash stays quarantined; with it, a live owner is refused and nothing changes', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const crashed = await crashedOwner(box, workspace);
    const plain = await cli(['serve', ...box.place(workspace), '--json']);
    expect(json(plain)).toMatchObject({ error: 'quarantine', message: expect.stringContaining(`pid ${crashed.pid}`) });
    expect(journalRecords(box)).toEqual([]);

    const { server } = await box.serve(workspace, ['--recover-dead']);
    const before = filesOf(box);
    const refused = await cli(['serve', ...box.place(workspace), '--recover-dead', '--json']);
    expect(refused.code).toBe(1);
    expect(json(refused)).toMatchObject({ error: 'conflict', message: expect.stringContaining(`pid ${server.pid}`) });
    expect(filesOf(box)).toEqual(before);
    expect(journalRecords(box)).toHaveLength(1);
  });

  it('refuses an owner of another PID namespace (ambiguous: its pid means nothing here), changing nothing', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    // The owner runs as pid 1 of its own PID namespace; killing unshare kills it (--kill-child).
    const contained = new Background('unshare', [
      '--pid',
      '--fork',
      '--kill-child',
      '--mount-proc',
      process.execPath,
      BIN,
      'serve',
      '--json',
      ...box.place(workspace),
    ]);
    await contained.until((stdout) => (stdout.includes('"event":"ready"') ? true : undefined), 'ready line');
    box.recordCapabilities();
    await contained.kill9();

    const before = filesOf(box);
    const refused = await cli(['serve', ...box.place(workspace), '--recover-dead', '--json']);
    expect(refused.code).toBe(1);
    expect(json(refused)).toEqual({
      error: 'quarantine',
      message: expect.stringContaining(`pid 1 on host ${hostname()} (ambiguous)`),
      remedy: expect.stringContaining('leasehold recover'),
    });
    expect(filesOf(box)).toEqual(before);
    expect(journalRecords(box)).toEqual([]);
  });
});

describe('recover --all-dead: after a reboot, every workspace whose owners are all proved gone, under one digest', () => {
  it('lists exactly the dead ones, refuses another digest, and recovers them (a record each) leaving the live owner alone', async () => {
    const box = sandbox();
    const dead = ['one', 'two', 'three'].map((name) => box.workspace(name));
    for (const workspace of dead) await crashedOwner(box, workspace);
    const alive = box.workspace('alive');
    const { server, ready } = await box.serve(alive);

    const review = await cli(['recover', '--all-dead', '--state-home', box.stateHome, '--json']);
    expect(review.code).toBe(0);
    const reviewed = json(review);
    expect(reviewed.digest).toMatch(DIGEST);
    expect((reviewed.workspaces as Array<{ root: string }>).map(({ root }) => root)).toEqual([...dead].sort());
    const human = await cli(['recover', '--all-dead', '--state-home', box.stateHome]);
    expect(human.stdout).toContain(
      `To recover them all: leasehold recover --all-dead --state-home ${box.stateHome} --digest ${String(reviewed.digest)} --yes`,
    );

    const digest = reviewed.digest as string;
    const other = digest.startsWith('0') ? `1${digest.slice(1)}` : `0${digest.slice(1)}`;
    const before = filesOf(box);
    const wrong = await cli([
      'recover',
      '--all-dead',
      '--state-home',
      box.stateHome,
      '--digest',
      other,
      '--yes',
      '--json',
    ]);
    expect(wrong.code).toBe(1);
    expect(json(wrong).error).toBe('conflict');
    expect(filesOf(box)).toEqual(before);

    const recovered = await cli([
      'recover',
      '--all-dead',
      '--state-home',
      box.stateHome,
      '--digest',
      digest,
      '--yes',
      '--json',
    ]);
    expect(recovered.code).toBe(0);
    expect(
      recovered.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { root: string; recovered: boolean }),
    ).toEqual([...dead].sort().map((root) => expect.objectContaining({ root, recovered: true })));
    expect(
      journalRecords(box)
        .map(({ root }) => root)
        .sort(),
    ).toEqual([...dead].sort());
    // The journal command lists each, and one workspace's alone with --workspace.
    const listed = json(await cli(['journal', '--state-home', box.stateHome, '--json'])).entries as Array<{
      root: string;
      automatic?: unknown;
    }>;
    expect(listed.map(({ root }) => root).sort()).toEqual([...dead].sort());
    expect(listed.every((entry) => entry.automatic === undefined)).toBe(true);
    expect(
      (json(await cli(['journal', ...box.place(dead[0]!), '--json'])).entries as Array<{ root: string }>).map(
        ({ root }) => root,
      ),
    ).toEqual([dead[0]]);
    for (const workspace of dead)
      expect(json(await cli(['status', ...box.place(workspace), '--json'])).status).toBe('stopped');
    expect(json(await cli(['status', ...box.place(alive), '--json']))).toMatchObject({
      status: 'running',
      epoch: ready.epoch,
    });

    // Nothing dead is left: the list is empty, and so is the work.
    const again = json(await cli(['recover', '--all-dead', '--state-home', box.stateHome, '--json']));
    expect(again.workspaces).toEqual([]);
    await cli(['stop', ...box.place(alive)]);
    expect((await server.exit()).code).toBe(0);
  });
});
