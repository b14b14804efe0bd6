import { readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { treeOf } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanEnv,
  cli,
  json,
  jsonLines,
  killAll,
  registryWriter,
  removeSandboxes,
  sandbox,
  type Sandbox,
  onLocalDisk,
  localFileSystem,
} from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ENDPOINT = /^http:\/\/127\.0\.0\.1:[1-9][0-9]*$/;
const DIGEST = /^[0-9a-f]{64}$/;

afterEach(async () => {
  await killAll();
  removeSandboxes();
  // After every test, alone or not: no capability seen so far is in any output, answer or state file.
  expect(capabilityLeaks()).toEqual([]);
});

/** `stop` on a stopped workspace answers stopped at once (exit 0), in both modes. */
async function expectStopIsIdempotent(box: Sandbox, workspace: string): Promise<void> {
  const again = await cli(['stop', ...box.place(workspace), '--json']);
  expect(again.code).toBe(0);
  expect(json(again)).toEqual({ stopped: true, root: workspace, epoch: expect.stringMatching(ID) });
  const human = await cli(['stop', ...box.place(workspace)]);
  expect(human.code).toBe(0);
  expect(human.stdout).toBe(`stopped   ${workspace} (it was not running)\n`);
}

describe('leasehold, end to end through the built binary', () => {
  it('serves, refuses a second owner, fences a crash, recovers by digest, serves again, lists and stops', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const nested = box.workspace('ws/packages/nested');
    const place = box.place(workspace);

    // serve --json: the ready line names the bound endpoint, a fresh epoch and the server's pid.
    const { server: first, ready: firstReady } = await box.serve(workspace);
    expect(firstReady).toEqual({
      event: 'ready',
      endpoint: expect.stringMatching(ENDPOINT),
      epoch: expect.stringMatching(ID),
      pid: first.pid,
    });

    // status --json: running, proved over the transport.
    const running = await cli(['status', ...place, '--json']);
    expect(running.code).toBe(0);
    expect(json(running)).toEqual({
      status: 'running',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch: firstReady.epoch,
      endpoint: firstReady.endpoint,
      pid: first.pid,
      capabilityFile: expect.stringMatching(/\/service\/local-capability\.json$/),
      config: expect.any(Object),
    });
    expect(running.stderr).toBe('');

    // A second serve on the same folder, and on a nested one, is refused.
    for (const other of [workspace, nested]) {
      const refused = await cli(['serve', ...box.place(other), '--json']);
      expect(refused.code).toBe(1);
      expect(json(refused)).toEqual({ error: 'conflict', message: expect.any(String), remedy: expect.any(String) });
    }
    // The refusals left the first owner running.
    expect((await cli(['status', ...place, '--json'])).code).toBe(0);

    // kill -9: the files cannot prove a live owner, and nothing may read as stopped.
    const killed = await first.kill9();
    expect(killed.signal).toBe('SIGKILL');
    const afterCrash = await cli(['status', ...place, '--json']);
    expect(afterCrash.code).toBe(3);
    const crashReport = json(afterCrash);
    expect(crashReport.status).not.toBe('running');
    expect(crashReport.status).not.toBe('stopped');
    expect(crashReport.status).not.toBe('absent');
    expect(crashReport.epoch).toBe(firstReady.epoch);
    // The next start says what blocks it: the dead owner, by pid, host and state, and the recovery that frees it.
    const blocked = await cli(['serve', ...place, '--json']);
    expect(blocked.code).toBe(1);
    expect(json(blocked)).toEqual({
      error: 'quarantine',
      message: expect.stringContaining(`pid ${first.pid} on host ${hostname()} (absent)`),
      remedy: expect.stringContaining('leasehold recover'),
    });
    const blockedHuman = await cli(['serve', ...place]);
    expect(blockedHuman.stderr).toMatch(
      new RegExp(`^leasehold: quarantine: .*pid ${first.pid} on host .* \\(absent\\)`),
    );

    // recover --json shows the fences, an absent owner and the digest; it changes nothing.
    const beforeReview = treeOf(box.stateHome);
    const review = await cli(['recover', ...place, '--json']);
    expect(review.code).toBe(0);
    const reviewed = json(review);
    expect(reviewed.ownerStatus).toBe('absent');
    expect(reviewed.digest).toMatch(DIGEST);
    // The dead owner's fences (the service's format and config may be listed too, as files it names).
    expect((reviewed.fences as Array<{ kind: string }>).map((fence) => fence.kind)).toEqual(
      expect.arrayContaining(['capability', 'checkout-lock', 'owner-lock', 'registration', 'registry-row']),
    );
    expect(JSON.stringify(reviewed.fences)).not.toContain('registry-lock');
    expect(reviewed.holders).toEqual([expect.objectContaining({ pid: first.pid, host: hostname(), status: 'absent' })]);
    const digest = reviewed.digest as string;
    // A review may sweep dead writers' staging leftovers; there are none here, so nothing changed.
    expect(treeOf(box.stateHome)).toEqual(beforeReview);

    // A wrong digest is refused and changes nothing: bytes, inodes and times of every file.
    const wrongDigest = digest.startsWith('0') ? `1${digest.slice(1)}` : `0${digest.slice(1)}`;
    const beforeWrong = treeOf(box.stateHome);
    const wrong = await cli(['recover', ...place, '--digest', wrongDigest, '--yes', '--json']);
    expect(wrong.code).toBe(1);
    expect(json(wrong)).toEqual({ error: 'conflict', message: expect.any(String), remedy: expect.any(String) });
    const wrongHuman = await cli(['recover', ...place, '--digest', wrongDigest, '--yes']);
    expect(wrongHuman.code).toBe(1);
    expect(wrongHuman.stdout).toBe('');
    expect(wrongHuman.stderr).toMatch(/^leasehold: conflict: /);
    // Not a digest at all: a usage error, found before anything is read.
    const malformed = await cli(['recover', ...place, '--digest', 'D', '--yes', '--json']);
    expect(malformed.code).toBe(2);
    expect(json(malformed)).toEqual({
      error: 'usage',
      message: '--digest D: not a digest (64 lowercase hex digits)',
      remedy: expect.stringContaining('`leasehold recover`'),
    });
    // The right digest without a confirmation, with no terminal to ask on: a usage error, nothing changed.
    const unconfirmed = await cli(['recover', ...place, '--digest', digest, '--json']);
    expect(unconfirmed.code).toBe(2);
    expect(json(unconfirmed).error).toBe('usage');
    expect(treeOf(box.stateHome)).toEqual(beforeWrong);

    // The human review: plain text with the root, the digest and the exact next command.
    const humanReview = await cli(['recover', ...place]);
    expect(humanReview.code).toBe(0);
    expect(humanReview.stdout.split('\n')).toEqual(
      expect.arrayContaining([
        `fences of ${workspace}:`,
        `  pid ${first.pid} on ${hostname()}: absent`,
        `digest  ${digest}`,
        `Every holder is gone. To recover: leasehold recover --workspace ${workspace} --state-home ${box.stateHome} --digest ${digest} --yes`,
      ]),
    );
    expect(humanReview.stdout).not.toMatch(/^\{/m);

    // The right digest with --yes recovers, and journals it.
    const recovered = await cli(['recover', ...place, '--digest', digest, '--yes', '--json']);
    expect(recovered.code).toBe(0);
    expect(json(recovered)).toEqual({ recovered: true });
    const journal = join(box.namespace, 'journal');
    const records = readdirSync(journal);
    expect(records).toHaveLength(1);
    const record = JSON.parse(readFileSync(join(journal, records[0]!), 'utf8')) as Record<string, unknown>;
    expect(record).toMatchObject({ schema: 'leasehold.recovery-record/1', root: workspace, digest });

    // stopped, with the dead server's epoch.
    const stopped = await cli(['status', ...place, '--json']);
    expect(stopped.code).toBe(3);
    expect(json(stopped)).toEqual({
      status: 'stopped',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch: firstReady.epoch,
      config: expect.any(Object),
    });
    const nothingLeft = await cli(['recover', ...place]);
    expect(nothingLeft.code).toBe(0);
    expect(nothingLeft.stdout).toBe(`nothing to recover: no fence remains for ${workspace}\n`);

    // serve again: a new epoch, listed with its live owner.
    const { server: second, ready: secondReady } = await box.serve(workspace);
    expect(secondReady.epoch).toMatch(ID);
    expect(secondReady.epoch).not.toBe(firstReady.epoch);
    const listed = await cli(['list', '--state-home', box.stateHome, '--json']);
    expect(listed.code).toBe(0);
    expect(json(listed)).toEqual({
      entries: [
        {
          root: workspace,
          status: 'running',
          endpoint: secondReady.endpoint,
          epoch: secondReady.epoch,
          pid: second.pid,
          host: hostname(),
          ownerStatus: 'live',
          rootExists: true,
          configIdentity: expect.stringMatching(DIGEST),
        },
      ],
    });
    // The same config identity as status shows: what an upgrade changes.
    const { config } = json(await cli(['status', ...place, '--json'])) as { config: { identity: string } };
    expect((json(listed).entries as Array<{ configIdentity: string }>)[0]?.configIdentity).toBe(config.identity);

    // The human forms of status and list.
    const humanStatus = await cli(['status', ...place]);
    expect(humanStatus.code).toBe(0);
    expect(humanStatus.stdout.split('\n')).toEqual([
      `running     ${workspace}`,
      `endpoint    ${secondReady.endpoint}`,
      `epoch       ${secondReady.epoch}`,
      `pid         ${second.pid}`,
      `config      ${config.identity.slice(0, 12)} (endpoint http://127.0.0.1:0)`,
      `state home  ${box.stateHome}, on ${localFileSystem(box.stateHome).name} (local: proven)`,
      '',
      `Stop it with: leasehold stop --workspace ${workspace} --state-home ${box.stateHome}`,
      '',
    ]);
    const humanList = await cli(['list', '--state-home', box.stateHome]);
    expect(humanList.code).toBe(0);
    const listLines = humanList.stdout.trimEnd().split('\n');
    expect(listLines).toHaveLength(2);
    expect(listLines[0]).toMatch(/^ROOT +STATUS +ENDPOINT +PID +PROCESS$/);
    expect(listLines[1]!.split(/ +/)).toEqual([workspace, 'running', secondReady.endpoint, String(second.pid), 'live']);

    // stop --json: the server stops cleanly and says so.
    const stop = await cli(['stop', ...place, '--json']);
    expect(stop.code).toBe(0);
    expect(json(stop)).toEqual({ stopped: true, root: workspace, epoch: secondReady.epoch });
    const ended = await second.exit();
    expect(ended.code).toBe(0);
    expect(ended.signal).toBe(null);
    expect(
      ended.stdout
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as unknown),
    ).toEqual([secondReady, { event: 'stopped', epoch: secondReady.epoch }]);
    const final = await cli(['status', ...place, '--json']);
    expect(final.code).toBe(3);
    expect(json(final)).toEqual({
      status: 'stopped',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch: secondReady.epoch,
      config: expect.any(Object),
    });
    const humanStopped = await cli(['status', ...place]);
    expect(humanStopped.code).toBe(3);
    expect(humanStopped.stdout.split('\n')).toEqual([
      `stopped     ${workspace}`,
      `epoch       ${secondReady.epoch}`,
      `config      ${config.identity.slice(0, 12)} (endpoint http://127.0.0.1:0)`,
      `state home  ${box.stateHome}, on ${localFileSystem(box.stateHome).name} (local: proven)`,
      '',
      `Start it with: leasehold serve --workspace ${workspace} --state-home ${box.stateHome}`,
      '',
    ]);
    const emptyList = await cli(['list', '--state-home', box.stateHome, '--json']);
    expect(json(emptyList)).toEqual({ entries: [] });
  });

  it('prints the crashed state for a person, with the root and the recover command', async () => {
    const box = sandbox();
    const workspace = box.workspace('crashed');
    const { server, ready } = await box.serve(workspace);
    await server.kill9();
    const status = await cli(['status', ...box.place(workspace)]);
    expect(status.code).toBe(3);
    const lines = status.stdout.split('\n');
    expect(lines[0]).toMatch(new RegExp(`^[a-z]+ +${workspace}$`));
    expect(lines[0]).not.toMatch(/^(running|stopped|absent) /);
    expect(lines).toEqual(expect.arrayContaining([expect.stringMatching(new RegExp(`^epoch +${ready.epoch}$`))]));
    expect(lines.at(-2)).toBe(
      `Its owner's process is gone; review what it left with: leasehold recover --workspace ${workspace} --state-home ${box.stateHome}`,
    );
    const listed = await cli(['list', '--state-home', box.stateHome]);
    // The same words as status: unavailable, because its owner is gone (never status's `absent`, which means never registered).
    expect(listed.stdout.trimEnd().split('\n')[1]!.split(/ +/)).toEqual([
      workspace,
      'unavailable',
      ready.endpoint,
      String(server.pid),
      'gone',
      '(owner-gone)',
    ]);
    expect(json(await cli(['list', '--state-home', box.stateHome, '--json'])).entries).toEqual([
      expect.objectContaining({
        root: workspace,
        status: 'unavailable',
        reasonCode: 'owner-gone',
        ownerStatus: 'absent',
      }),
    ]);
  });

  it('one crash blocks nobody else: other workspaces serve past its fences and a dead registry writer, and its digest still holds', async () => {
    const box = sandbox();
    const crashed = box.workspace('crashed');
    const { server, ready } = await box.serve(crashed);
    await server.kill9();
    const review = json(await cli(['recover', ...box.place(crashed), '--json']));
    expect(review.ownerStatus).toBe('absent');
    const digest = review.digest as string;

    // A registry writer killed inside its transaction: its lock stays, naming a process that is gone.
    const writer = await registryWriter(box.stateHome, box.workspace('writer'));
    await writer.kill9();
    expect(readdirSync(join(box.namespace, 'registry'))).toContain('registry.lock');

    // Another workspace serves (taking the dead lock over), is listed beside the crashed one, and stops, twice.
    const untouched = box.workspace('untouched');
    const busy = box.workspace('busy');
    for (let round = 0; round < 2; round += 1) {
      const { server: other, ready: otherReady } = await box.serve(busy);
      const listed = json(await cli(['list', '--state-home', box.stateHome, '--json'])) as {
        entries: Array<{ root: string }>;
      };
      expect(listed.entries.map((entry) => entry.root).sort()).toEqual([busy, crashed].sort());
      expect(json(await cli(['stop', ...box.place(busy), '--json']))).toEqual({
        stopped: true,
        root: busy,
        epoch: otherReady.epoch,
      });
      expect((await other.exit()).code).toBe(0);
    }
    expect(readdirSync(join(box.namespace, 'registry')).sort()).toEqual(['format.json', 'roots.json']);
    expect(json(await cli(['status', ...box.place(untouched), '--json']))).toEqual({
      status: 'absent',
      ...onLocalDisk(box.stateHome),
      root: untouched,
      epoch: null,
    });

    // The digest reviewed before all that still names the crashed workspace's state: it recovers.
    const recovered = await cli(['recover', ...box.place(crashed), '--digest', digest, '--yes', '--json']);
    expect(recovered.code).toBe(0);
    expect(json(recovered)).toEqual({ recovered: true });
    expect(json(await cli(['status', ...box.place(crashed), '--json']))).toEqual({
      status: 'stopped',
      ...onLocalDisk(box.stateHome),
      root: crashed,
      epoch: ready.epoch,
      config: expect.any(Object),
    });
  });

  it('takes its places from options after the command, from LEASEHOLD_STATE_HOME, and from the current folder', async () => {
    const box = sandbox();
    const workspace = box.workspace('placed');
    // Options after the command name, in either order.
    const { server, ready } = await box.serve(workspace);
    const reordered = await cli(['status', '--json', '--state-home', box.stateHome, '--workspace', workspace]);
    expect(reordered.code).toBe(0);
    expect(json(reordered).epoch).toBe(ready.epoch);
    // The state home from the environment, the workspace from the current folder.
    const fromEnvironment = await cli(['status', '--json'], {
      cwd: workspace,
      env: cleanEnv({ LEASEHOLD_STATE_HOME: box.stateHome }),
    });
    expect(fromEnvironment.code).toBe(0);
    expect(json(fromEnvironment)).toEqual({
      status: 'running',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch: ready.epoch,
      endpoint: ready.endpoint,
      pid: server.pid,
      capabilityFile: expect.stringMatching(/\/service\/local-capability\.json$/),
      config: expect.any(Object),
    });
    // A relative --workspace is taken from the current folder.
    const relative = await cli(['status', '--json', '--workspace', 'placed', '--state-home', box.stateHome], {
      cwd: box.folder,
    });
    expect(json(relative).epoch).toBe(ready.epoch);
    // Another state home holds nothing of it, and the folder's own mark says whose it is: running, through this one.
    const elsewhere = await cli([
      'status',
      '--json',
      '--workspace',
      workspace,
      '--state-home',
      `${box.folder}/other-state`,
    ]);
    expect(elsewhere.code).toBe(0);
    expect(json(elsewhere)).toMatchObject({
      status: 'running',
      root: workspace,
      epoch: ready.epoch,
      through: { stateHome: box.stateHome, epoch: ready.epoch },
      ...onLocalDisk(`${box.folder}/other-state`),
    });
    const stop = await cli(['stop', '--json', '--state-home', box.stateHome, '--workspace', workspace]);
    expect(json(stop)).toEqual({ stopped: true, root: workspace, epoch: ready.epoch });
    expect((await server.exit()).code).toBe(0);
  });

  it('stops cleanly on SIGTERM, SIGINT and SIGHUP (a closed terminal): exit 0, a stopped event, and status stopped', async () => {
    const box = sandbox();
    const workspace = box.workspace('signals');
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
      const { server, ready } = await box.serve(workspace);
      server.child.kill(signal);
      const ended = await server.exit();
      expect(ended.code, signal).toBe(0);
      expect(ended.signal).toBe(null);
      expect(jsonLines(ended.stdout)).toEqual([ready, { event: 'stopped', epoch: ready.epoch }]);
      expect(ended.stderr).toBe('');
      const status = await cli(['status', ...box.place(workspace), '--json']);
      expect(status.code).toBe(3);
      expect(json(status)).toEqual({
        status: 'stopped',
        ...onLocalDisk(box.stateHome),
        root: workspace,
        epoch: ready.epoch,
        config: expect.any(Object),
      });
      expect(json(await cli(['list', '--state-home', box.stateHome, '--json']))).toEqual({ entries: [] });
    }
    await expectStopIsIdempotent(box, workspace);
  });

  it('upgrades a stopped workspace to another config only with --replace-config, and never while it is fenced', async () => {
    const box = sandbox();
    const workspace = box.workspace('upgrade');
    const place = box.place(workspace);
    const { server: first, ready: firstReady } = await box.serve(workspace);
    expect((await cli(['stop', ...place, '--json'])).code).toBe(0);
    expect((await first.exit()).code).toBe(0);

    // The next owner asks for a fixed endpoint (the one just freed): another config, refused with the option to pass.
    const fixed = firstReady.endpoint;
    const before = treeOf(box.stateHome, { folderTimes: false });
    const refused = await cli(['serve', ...place, '--endpoint', fixed, '--json']);
    expect(refused.code).toBe(1);
    expect(json(refused)).toEqual({
      error: 'conflict',
      message: expect.stringContaining('another config exists'),
      path: expect.stringMatching(/\/service\/config\.json$/),
      remedy: expect.stringContaining('--replace-config'),
    });
    expect(treeOf(box.stateHome, { folderTimes: false })).toEqual(before);

    const previous = json(await cli(['status', ...place, '--json'])).config as { identity: string; endpoint: string };
    expect(previous.endpoint).toBe('http://127.0.0.1:0');
    const { server: upgraded, ready } = await box.serve(workspace, ['--endpoint', fixed, '--replace-config']);
    expect(ready.endpoint).toBe(fixed);
    // status and list show the new config by its identity: the upgrade is seen, not guessed.
    const after = json(await cli(['status', ...place, '--json']));
    expect(after).toMatchObject({
      status: 'running',
      endpoint: fixed,
      epoch: ready.epoch,
      config: { endpoint: fixed, identity: expect.stringMatching(DIGEST) },
    });
    expect((after.config as { identity: string }).identity).not.toBe(previous.identity);
    expect(json(await cli(['list', '--state-home', box.stateHome, '--json'])).entries).toEqual([
      expect.objectContaining({ root: workspace, configIdentity: (after.config as { identity: string }).identity }),
    ]);

    // (A refused serve still takes and removes the registry lock: folder times change, nothing else.)
    // Fenced by a crashed owner: --replace-config changes nothing and says quarantine.
    await upgraded.kill9();
    const fenced = treeOf(box.stateHome, { folderTimes: false });
    const blocked = await cli(['serve', ...place, '--replace-config', '--json']);
    expect(blocked.code).toBe(1);
    expect(json(blocked)).toMatchObject({
      error: 'quarantine',
      message: expect.stringContaining(`pid ${upgraded.pid} on host`),
    });
    expect(treeOf(box.stateHome, { folderTimes: false })).toEqual(fenced);
  });

  it('serves on a requested port, and refuses a busy port, a non-loopback endpoint and a bad --watch-ms', async () => {
    const box = sandbox();
    const workspace = box.workspace('endpoints');
    // A port that is free now: bind it, learn it, free it.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const { ready } = await box.serve(workspace, ['--endpoint', `http://127.0.0.1:${port}`]);
    expect(ready.endpoint).toBe(`http://127.0.0.1:${port}`);
    const status = await cli(['status', ...box.place(workspace), '--json']);
    expect(json(status)).toMatchObject({ status: 'running', endpoint: `http://127.0.0.1:${port}` });

    // The same port for another workspace: the bind fails first, and nothing of it is registered.
    const other = box.workspace('other');
    const busy = await cli(['serve', ...box.place(other), '--endpoint', `http://127.0.0.1:${port}`, '--json']);
    expect(busy.code).toBe(1);
    expect(json(busy)).toMatchObject({ error: 'conflict', message: expect.stringContaining('EADDRINUSE') });
    // A mistake in the command line is a usage error (exit 2) whose remedy is about the command line, not the files.
    for (const endpoint of [
      'http://0.0.0.0:0',
      'http://localhost:0',
      'https://127.0.0.1:0',
      'http://127.0.0.1:080',
      'http://192.0.2.1:0',
    ]) {
      const refused = await cli(['serve', ...box.place(other), '--endpoint', endpoint, '--json']);
      expect(refused.code, endpoint).toBe(2);
      expect(json(refused), endpoint).toEqual({
        error: 'usage',
        message: `--endpoint ${endpoint}: not a loopback endpoint`,
        remedy: expect.stringContaining('http://127.0.0.1:PORT'),
      });
    }
    for (const watch of ['5', 'soon', '1.5', '-100']) {
      const refused = await cli(['serve', ...box.place(other), `--watch-ms=${watch}`, '--json']);
      expect(refused.code, watch).toBe(2);
      expect(json(refused), watch).toEqual({
        error: 'usage',
        message: `--watch-ms ${watch}: not a whole number of at least 10`,
        remedy: expect.stringContaining('--watch-ms='),
      });
    }
    // A value that starts with a dash, given as the next word: parseArgs's own message would only puzzle.
    const dashed = await cli(['serve', ...box.place(other), '--watch-ms', '-5', '--json']);
    expect(dashed.code).toBe(2);
    expect(json(dashed)).toMatchObject({ error: 'usage', message: expect.stringContaining('write --watch-ms=VALUE') });
    const listed = json(await cli(['list', '--state-home', box.stateHome, '--json'])) as {
      entries: Array<{ root: string }>;
    };
    expect(listed.entries.map((entry) => entry.root)).toEqual([workspace]);
    expect(json(await cli(['status', ...box.place(other), '--json']))).toEqual({
      status: 'absent',
      ...onLocalDisk(box.stateHome),
      root: other,
      epoch: null,
    });
  });

  it('list --all shows stopped workspaces too, in the words of status; list alone the fenced ones', async () => {
    const box = sandbox();
    const stopped = box.workspace('stopped');
    const running = box.workspace('running');
    const first = await box.serve(stopped);
    expect((await cli(['stop', ...box.place(stopped)])).code).toBe(0);
    expect((await first.server.exit()).code).toBe(0);
    const { server, ready } = await box.serve(running);
    const fenced = json(await cli(['list', '--state-home', box.stateHome, '--json'])).entries as Array<{
      root: string;
    }>;
    expect(fenced.map(({ root }) => root)).toEqual([running]);
    const all = json(await cli(['list', '--all', '--state-home', box.stateHome, '--json']));
    expect(all.entries).toEqual([
      expect.objectContaining({
        root: running,
        status: 'running',
        epoch: ready.epoch,
        pid: server.pid,
        ownerStatus: 'live',
      }),
      {
        root: stopped,
        status: 'stopped',
        endpoint: null,
        epoch: first.ready.epoch,
        pid: null,
        host: null,
        ownerStatus: null,
        rootExists: true,
        configIdentity: expect.stringMatching(DIGEST),
      },
    ]);
    const human = await cli(['list', '--all', '--state-home', box.stateHome]);
    expect(human.stdout.trimEnd().split('\n')[2]!.split(/ +/)).toEqual([stopped, 'stopped', '-', '-', '-']);
    expect((await cli(['stop', ...box.place(running)])).code).toBe(0);
    expect((await server.exit()).code).toBe(0);
  });

  it('prints usage for --help on each command (exit 0), and exits 2 on an unknown command or option', async () => {
    for (const command of ['serve', 'status', 'stop', 'list', 'recover', 'doctor']) {
      const help = await cli([command, '--help']);
      expect(help.code, command).toBe(0);
      expect(help.stdout.split('\n')[0], command).toMatch(new RegExp(`^leasehold ${command} `));
      expect(help.stdout).toContain('--workspace DIR');
      expect(help.stdout).toContain('--state-home DIR');
      expect(help.stderr).toBe('');
      const short = await cli([command, '-h']);
      expect(short.code).toBe(0);
      expect(short.stdout).toBe(help.stdout);
    }
    const overview = await cli(['--help']);
    expect(overview.code).toBe(0);
    expect(overview.stdout).toMatch(/^usage: leasehold <command> \[options\]$/m);
    const bare = await cli([]);
    expect(bare.code).toBe(2);
    expect(bare.stdout).toBe(overview.stdout);

    const unknownCommand = await cli(['frobnicate']);
    expect(unknownCommand.code).toBe(2);
    expect(unknownCommand.stderr).toMatch(
      /^leasehold: usage: unknown command 'frobnicate'\n {2}run `leasehold --help` for the commands\n/,
    );
    expect(unknownCommand.stdout).toBe('');
    const unknownCommandJson = await cli(['frobnicate', '--json']);
    expect(unknownCommandJson.code).toBe(2);
    expect(json(unknownCommandJson)).toEqual({
      error: 'usage',
      message: "unknown command 'frobnicate'",
      remedy: 'run `leasehold --help` for the commands',
    });
    // A command one edit away (a letter added, dropped, changed, or two swapped) is named.
    for (const typo of ['stauts', 'statsu', 'stats', 'lsit']) {
      const mistyped = await cli([typo, '--json']);
      expect(mistyped.code, typo).toBe(2);
      expect(json(mistyped), typo).toEqual({
        error: 'usage',
        message: `unknown command '${typo}'`,
        remedy: `did you mean \`leasehold ${typo.startsWith('l') ? 'list' : 'status'}\`?`,
      });
    }
    // `help CMD` is `CMD --help`; `help` of no such command is a usage error naming the nearest.
    for (const command of ['serve', 'status', 'recover']) {
      const asked = await cli(['help', command]);
      expect(asked.code, command).toBe(0);
      expect(asked.stdout, command).toBe((await cli([command, '--help'])).stdout);
    }
    const helpTypo = await cli(['help', 'sevre']);
    expect(helpTypo.code).toBe(2);
    expect(helpTypo.stderr).toMatch(
      /^leasehold: usage: help: no command 'sevre'\n {2}did you mean `leasehold help serve`\?\n/,
    );
    // Options before the command: the remedy is the same command line, the command first.
    const optionsFirst = await cli(['--json', '--state-home', '/tmp/a b', 'list']);
    expect(optionsFirst.code).toBe(2);
    expect(json(optionsFirst)).toEqual({
      error: 'usage',
      message: 'options go after the command: --json --state-home /tmp/a b list',
      remedy: "run: leasehold list --json --state-home '/tmp/a b'",
    });

    const unknownOption = await cli(['status', '--frobnicate']);
    expect(unknownOption.code).toBe(2);
    expect(unknownOption.stderr).toContain('--frobnicate');
    expect(unknownOption.stderr).toContain('leasehold status [--watch [--poll-ms N]] [options]');
    const unknownOptionJson = await cli(['list', '--json', '--bogus']);
    expect(unknownOptionJson.code).toBe(2);
    expect(json(unknownOptionJson)).toEqual({
      error: 'usage',
      message: expect.stringContaining('--bogus'),
      remedy: 'run `leasehold list --help` for its options',
    });
    // An option of another command, and a positional argument, are usage errors too.
    expect((await cli(['status', '--digest', 'x'])).code).toBe(2);
    expect((await cli(['list', 'extra'])).code).toBe(2);
  });
});
