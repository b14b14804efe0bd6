import { chmodSync, chownSync, mkdirSync, realpathSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { treeOf } from '@leasehold/test-utils';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Background, BIN, json, killAll, removeSandboxes, sandbox, type Result } from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

// A state home or workspace this user may not use is a permission problem, said as one: `refused`
// with the path, the errno or the owner, and a remedy about users and permissions; never
// `unavailable`, `absent` or a recovery, and `doctor` reports it (exit 3). The commands run as
// a second, unprivileged user (uid 65534, through setpriv), on files made by this one (root).

const NOBODY = 65534;

/**
 * The folders above the built command that other users may not pass through (a checkout in a
 * 0700 temp folder, as `mktemp -d` makes): given the search bit for this file's tests only, so that
 * uid 65534 can run the command, and given back their modes after. Nothing is made readable.
 */
const opened: Array<{ path: string; mode: number }> = [];
beforeAll(() => {
  for (let folder = dirname(realpathSync(BIN)); ; folder = dirname(folder)) {
    const mode = statSync(folder).mode & 0o7777;
    if ((mode & 0o001) === 0) {
      chmodSync(folder, mode | 0o001);
      opened.push({ path: folder, mode });
    }
    if (folder === dirname(folder)) break;
  }
});
afterAll(() => {
  for (const { path, mode } of opened.splice(0)) chmodSync(path, mode);
});

afterEach(async () => {
  await killAll();
  removeSandboxes();
  expect(capabilityLeaks()).toEqual([]);
});

/** `leasehold ARGS --json` as uid 65534, with no group of this user. */
function runAs(args: readonly string[]): Promise<Result> {
  return new Background('setpriv', [
    `--reuid=${NOBODY}`,
    `--regid=${NOBODY}`,
    '--clear-groups',
    process.execPath,
    BIN,
    ...args,
    '--json',
  ]).exit();
}

/** A sandbox the other user may enter (its state home and workspaces stay root's, 0700). */
function openSandbox() {
  const box = sandbox();
  chmodSync(box.folder, 0o755);
  return box;
}

const PERMISSION_REMEDY = /run leasehold as|give this user access|pass a --state-home of your own/;

describe('as another user: permission problems read as permission problems', () => {
  it('the built command is reachable by that user (else every check below would prove nothing)', async () => {
    const version = await runAs(['--version']);
    expect(version.stderr, 'the checkout and node must be readable by uid 65534').toBe('');
    expect(version.code).toBe(0);
  });

  it("another user's state home: status, list, stop, recover and serve are refused naming its owner; doctor reports it; nothing changes", async () => {
    const box = openSandbox();
    const workspace = box.workspace('ws');
    chmodSync(workspace, 0o755);
    const { server } = await box.serve(workspace);
    await server.kill9();
    const before = treeOf(box.stateHome);
    for (const command of ['status', 'list', 'stop', 'recover', 'serve']) {
      const answer = await runAs([command, ...box.place(workspace)]);
      expect(answer.code, command).toBe(1);
      expect(json(answer), command).toEqual({
        error: 'refused',
        message: `${box.stateHome}: it belongs to uid 0, not to this user (uid ${NOBODY})`,
        path: box.stateHome,
        remedy: expect.stringMatching(PERMISSION_REMEDY),
      });
    }
    const doctor = await runAs(['doctor', '--state-home', box.stateHome]);
    expect(doctor.code).toBe(3);
    // Not a chown that user may not run: another user's state home is theirs.
    expect(json(doctor).findings).toEqual([
      expect.objectContaining({
        file: box.stateHome,
        kind: 'foreign-owner',
        fix: 'it is the state home of uid 0: run as that user, or use a state home of your own',
      }),
    ]);
    expect(treeOf(box.stateHome)).toEqual(before);
  });

  it('a state home below a folder that user may not enter: refused with EACCES, and doctor says so', async () => {
    const box = sandbox(); // 0700: uid 65534 cannot enter it
    const stateHome = join(box.folder, 'state');
    const status = await runAs(['status', '--workspace', '/', '--state-home', stateHome]);
    expect(status.code).toBe(1);
    expect(json(status)).toEqual({
      error: 'refused',
      message: `${stateHome}: permission denied (EACCES): this user may not enter a folder above it`,
      path: stateHome,
      remedy: expect.stringMatching(PERMISSION_REMEDY),
    });
    const doctor = await runAs(['doctor', '--state-home', stateHome]);
    expect(doctor.code).toBe(3);
    expect(json(doctor).findings).toEqual([
      expect.objectContaining({ file: stateHome, kind: 'permission', problem: expect.stringContaining('EACCES') }),
    ]);
  });

  it('a state home that user may not create: serve is refused naming the folder, doctor reports it, status reads it as empty', async () => {
    const box = openSandbox();
    const workspace = box.workspace('ws');
    chmodSync(workspace, 0o755);
    const stateHome = join(box.folder, 'new', 'state');
    const serve = await runAs(['serve', '--workspace', workspace, '--state-home', stateHome]);
    expect(serve.code).toBe(1);
    expect(json(serve)).toEqual({
      error: 'refused',
      message: `${box.folder}: ${stateHome} cannot be created: this user may not write in ${box.folder} (EACCES)`,
      path: box.folder,
      remedy: expect.stringContaining('pass a --state-home of your own'),
    });
    const doctor = await runAs(['doctor', '--state-home', stateHome]);
    expect(doctor.code).toBe(3);
    expect(json(doctor).findings).toEqual([expect.objectContaining({ file: box.folder, kind: 'permission' })]);
    // A reader has nothing to create: a state home that is not there reads as empty.
    expect(json(await runAs(['status', '--workspace', workspace, '--state-home', stateHome]))).toMatchObject({
      status: 'absent',
    });
  });

  it('a workspace that user may not see: refused with EACCES, not absent', async () => {
    const box = openSandbox();
    const hidden = box.workspace('hidden');
    mkdirSync(join(hidden, 'inner'));
    chmodSync(hidden, 0o700);
    const stateHome = join(box.folder, 'nobody-state');
    mkdirSync(stateHome, { mode: 0o700 });
    chownSync(stateHome, NOBODY, NOBODY);
    for (const command of ['status', 'serve']) {
      const answer = await runAs([command, '--workspace', join(hidden, 'inner'), '--state-home', stateHome]);
      expect(answer.code, command).toBe(1);
      expect(json(answer), command).toEqual({
        error: 'refused',
        message: `${join(hidden, 'inner')}: permission denied (EACCES): this user may not see that folder`,
        path: join(hidden, 'inner'),
        remedy: expect.stringMatching(PERMISSION_REMEDY),
      });
    }
  });
});
