import { chmodSync, mkdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StateHomeError } from '@leasehold/state-home';
import { cleanUp, modeOf, pathExists } from '@leasehold/test-utils';
import {
  Server,
  cleanEnv,
  cli,
  json,
  killAll,
  removeSandboxes,
  sandbox,
  onLocalDisk,
  localFileSystem,
} from '../test/helpers.js';
import { problemOf } from './remedies.js';

afterEach(async () => {
  await killAll();
  removeSandboxes();
  await cleanUp();
});

/** No Node.js error reaches a person raw: every failure line is `leasehold: <code>: <message>`, and no stack. */
function expectNoRawError(stderr: string): void {
  expect(stderr).not.toMatch(/^(Error|node:)|\n\s+at /m);
}

describe('a state home a person made with mkdir (0755) before the first serve', () => {
  it('empty: serve takes it, made 0700, and serves', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    mkdirSync(box.stateHome);
    chmodSync(box.stateHome, 0o755);
    expect(json(await cli(['status', ...box.place(workspace), '--json']))).toEqual({
      status: 'absent',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch: null,
    });
    const { server } = await box.serve(workspace);
    expect(modeOf(box.stateHome)).toBe(0o700);
    expect((await cli(['stop', ...box.place(workspace)])).code).toBe(0);
    expect((await server.exit()).code).toBe(0);
  });

  it('holding a file: serve is refused with the chmod that fixes it, and once run as printed, serves', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    mkdirSync(box.stateHome);
    writeFileSync(join(box.stateHome, 'notes.txt'), 'mine', { mode: 0o600 });
    chmodSync(box.stateHome, 0o755);
    const refused = await cli(['serve', ...box.place(workspace), '--json']);
    expect(refused.code).toBe(1);
    const remedy = `take the group and other bits away: \`chmod 700 ${box.stateHome}\``;
    expect(json(refused)).toEqual({
      error: 'refused',
      message: `${box.stateHome}: folder has group or other permission bits`,
      path: box.stateHome,
      remedy,
    });
    expect(modeOf(box.stateHome)).toBe(0o755);
    expect((await box.shell(/`([^`]+)`/.exec(remedy)![1]!)).code).toBe(0);
    const { server } = await box.serve(workspace);
    expect((await cli(['stop', ...box.place(workspace)])).code).toBe(0);
    expect((await server.exit()).code).toBe(0);
  });

  it('a symbolic link to such a folder: serve is refused, naming the link, and the folder is left as it is', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const real = join(box.folder, 'real-state');
    mkdirSync(real);
    chmodSync(real, 0o755);
    symlinkSync(real, box.stateHome);
    const refused = await cli(['serve', ...box.place(workspace), '--json']);
    expect(refused.code).toBe(1);
    expect(json(refused)).toEqual({
      error: 'refused',
      message: `${box.stateHome}: folder is a symbolic link`,
      path: box.stateHome,
      remedy: `a symbolic link is never followed: name the folder it points to instead, or remove the link: \`rm ${box.stateHome}\``,
    });
    expect(modeOf(real)).toBe(0o755);
  });
});

describe('a state home that does not exist yet, not even its parent', () => {
  it('reads as empty for status, list, doctor, stop and recover, which create nothing', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const stateHome = join(box.folder, 'fresh', 'state');
    const place = ['--workspace', workspace, '--state-home', stateHome, '--json'];
    const answers = await Promise.all(
      ['status', 'list', 'doctor', 'stop', 'recover'].map((command) => cli([command, ...place])),
    );
    expect(answers.map(({ code }) => code)).toEqual([3, 0, 0, 0, 0]);
    expect(answers.slice(0, 4).map(json)).toEqual([
      { status: 'absent', root: workspace, epoch: null, ...onLocalDisk(stateHome) },
      { entries: [] },
      // Judged where it will be made: the nearest folder that exists.
      { fileSystem: localFileSystem(box.folder), findings: [] },
      { stopped: true, root: workspace, epoch: null },
    ]);
    const review = json(answers[4]!);
    expect(review).toMatchObject({ ownerStatus: 'absent', fences: [], holders: [] });

    // The digest it showed, confirmed: nothing to recover, and the authority check needs no state home.
    const confirmed = await cli(['recover', ...place, '--digest', String(review.digest), '--yes']);
    expect(confirmed).toMatchObject({ code: 0, stderr: '' });
    expect(json(confirmed)).toEqual({ recovered: false, reason: 'clear' });
    expect(pathExists(join(box.folder, 'fresh'))).toBe(false);
  });

  it('is created, 0700 with its parents, by serve, which then serves and stops', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const stateHome = join(box.folder, 'fresh', 'state');
    const server = new Server(['--workspace', workspace, '--state-home', stateHome], {});
    await server.ready();
    expect(modeOf(stateHome)).toBe(0o700);
    expect(statSync(stateHome).isDirectory()).toBe(true);
    expect(json(await cli(['stop', '--workspace', workspace, '--state-home', stateHome, '--json']))).toMatchObject({
      stopped: true,
    });
    expect((await server.exit()).code).toBe(0);
  });
});

describe('a --workspace that does not exist', () => {
  it('is a refusal naming the folder and the remedy for serve, and creates no state home', async () => {
    const box = sandbox();
    const missing = join(box.folder, 'no-such-folder');
    const place = ['--workspace', missing, '--state-home', box.stateHome];
    const human = await cli(['serve', ...place]);
    expect(human).toMatchObject({ code: 1, stdout: '' });
    expect(human.stderr).toMatch(
      new RegExp(`^leasehold: refused: ${missing}: .*\n  pass an existing folder with --workspace .*\n$`),
    );
    expectNoRawError(human.stderr);
    const machine = await cli(['serve', ...place, '--json']);
    expect(machine.code).toBe(1);
    expect(json(machine)).toEqual({
      error: 'refused',
      message: expect.stringContaining(missing),
      path: missing,
      remedy: expect.stringContaining('--workspace'),
    });
    expect(pathExists(box.stateHome)).toBe(false);
  });

  it('is a refusal for status, stop and recover too, naming the path, unless the state home names a workspace there', async () => {
    const box = sandbox();
    const missing = join(box.folder, 'no-such-folder');
    const place = ['--workspace', missing, '--state-home', box.stateHome];
    for (const command of ['status', 'stop', 'recover']) {
      const human = await cli([command, ...place]);
      expect(human, command).toMatchObject({ code: 1, stdout: '' });
      expect(human.stderr, command).toBe(
        `leasehold: refused: ${missing}: not an existing folder, and the state home names no workspace there\n  pass an existing folder with --workspace (default: the current folder): check the path\n`,
      );
      expect(json(await cli([command, ...place, '--json'])), command).toMatchObject({
        error: 'refused',
        path: missing,
      });
    }
    // A registered folder that was deleted is still shown: stopped, with the step that says no folder is there.
    const gone = box.workspace('gone');
    const { server } = await box.serve(gone);
    expect((await cli(['stop', ...box.place(gone)])).code).toBe(0);
    await server.exit();
    rmSync(gone, { recursive: true });
    const shown = await cli(['status', ...box.place(gone)]);
    expect(shown.code).toBe(3);
    expect(shown.stdout).toMatch(new RegExp(`^stopped +${gone}\n`));
    expect(shown.stdout).toContain(`No folder is at ${gone}: pass an existing one with --workspace.`);
  });
});

describe('a state home that cannot be one', () => {
  it('below a file: serve refuses, naming the path, with no raw system error', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const file = join(box.folder, 'a-file');
    writeFileSync(file, '', { mode: 0o600 });
    const place = ['--workspace', workspace, '--state-home', join(file, 'state')];
    const human = await cli(['serve', ...place]);
    expect(human.code).toBe(1);
    expect(human.stderr).toMatch(new RegExp(`^leasehold: refused: ${join(file, 'state')}: .*${file}`));
    expectNoRawError(human.stderr);
    expect(json(await cli(['serve', ...place, '--json']))).toMatchObject({
      error: 'refused',
      remedy: expect.any(String),
    });
  });

  it('a relative LEASEHOLD_STATE_HOME: refused, with the remedy that fixes the variable', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const human = await cli(['list', '--workspace', workspace], {
      env: cleanEnv({ LEASEHOLD_STATE_HOME: 'relative/state' }),
    });
    expect(human).toMatchObject({
      code: 1,
      stdout: '',
      stderr: expect.stringContaining(
        '\n  set LEASEHOLD_STATE_HOME to an absolute path (or unset it), or pass --state-home DIR\n',
      ),
    });
  });
});

describe("this host's etcd setup, which @leasehold/state-home refuses with its remedy", () => {
  it('half a pair of credentials: init records nothing, reaches no etcd, and says to export both or neither', async () => {
    const box = sandbox();
    const init = [
      'init',
      '--state-home',
      box.stateHome,
      '--etcd-endpoints',
      'http://127.0.0.1:1',
      '--etcd-prefix',
      '/leasehold/setup',
    ];
    const env = cleanEnv({ LEASEHOLD_ETCD_USER: 'alice' });
    const human = await cli(init, { env });
    expect(human).toEqual({
      code: 1,
      signal: null,
      stdout: '',
      stderr:
        'leasehold: refused: LEASEHOLD_ETCD_USER and LEASEHOLD_ETCD_PASSWORD: set both or neither\n  export both LEASEHOLD_ETCD_USER and LEASEHOLD_ETCD_PASSWORD, or unset both\n',
    });
    expect(json(await cli([...init, '--json'], { env }))).toEqual({
      error: 'refused',
      message: 'LEASEHOLD_ETCD_USER and LEASEHOLD_ETCD_PASSWORD: set both or neither',
      remedy: 'export both LEASEHOLD_ETCD_USER and LEASEHOLD_ETCD_PASSWORD, or unset both',
    });
    expect(pathExists(box.stateHome)).toBe(false);
  });

  it.each([
    {
      kind: 'set-both-or-neither',
      variables: ['LEASEHOLD_ETCD_CERT', 'LEASEHOLD_ETCD_KEY'],
      remedy: 'export both LEASEHOLD_ETCD_CERT and LEASEHOLD_ETCD_KEY, or unset both',
    },
    { kind: 'set-also', variables: ['LEASEHOLD_ETCD_CA'], remedy: 'export LEASEHOLD_ETCD_CA as well' },
    {
      kind: 'readable-file',
      variables: ['LEASEHOLD_ETCD_KEY'],
      remedy: 'point LEASEHOLD_ETCD_KEY at a readable PEM file',
    },
    {
      kind: 'install-etcd',
      variables: [],
      remedy:
        'install @leasehold/etcd beside @leasehold/state-home (for the leasehold command: install @leasehold/cli again, with its dependencies, @leasehold/etcd among them)',
    },
  ] as const)('$kind: told with the words @leasehold/state-home put on the error', ({ kind, variables, remedy }) => {
    expect(problemOf(new StateHomeError('what went wrong', kind, variables))).toEqual({
      code: 'refused',
      message: 'what went wrong',
      remedy,
    });
  });
});

describe('a system error that reaches the command', () => {
  it('is told once, with its path, the call that failed and what to check', () => {
    const missing = join(sandbox().folder, 'gone');
    let caught: unknown;
    try {
      statSync(missing);
    } catch (error) {
      caught = error;
    }
    expect(problemOf(caught)).toEqual({
      code: 'ENOENT',
      message: `${missing}: no such file or directory (stat)`,
      path: missing,
      remedy: expect.stringContaining('check --workspace and --state-home'),
    });
  });
});
