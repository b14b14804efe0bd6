import { chmodSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { replaceFile, treeOf } from '@leasehold/test-utils';
import { cli, json, jsonLines, killAll, removeSandboxes, sandbox, type Result, onLocalDisk } from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

afterEach(async () => {
  await killAll();
  removeSandboxes();
  // After every test, alone or not: no capability seen so far is in any output, answer or state file.
  expect(capabilityLeaks()).toEqual([]);
});

/** The server's exit after a lost lease: status 4, a `lost` event after `ready`, and a line for a person on stderr (none with --json). */
function expectLost(ended: Result, epoch: string): void {
  expect(ended.code).toBe(4);
  expect(ended.signal).toBe(null);
  const events = jsonLines(ended.stdout);
  expect(events).toHaveLength(2);
  expect(events[0]).toMatchObject({ event: 'ready', epoch });
  expect(events[1]).toEqual({ event: 'lost', epoch, error: expect.stringMatching(/^(conflict|refused)$/) });
}

describe('a server whose files change under it', () => {
  it('exits 4 and touches nothing when registration.json is replaced by identical bytes', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server, ready } = await box.serve(workspace, ['--watch-ms', '50']);
    const [service] = box.serviceFolders();
    const registration = join(service!, 'registration.json');
    const bytes = readFileSync(registration);

    // Same bytes, same mode, a new inode: written beside the state home, then renamed over.
    replaceFile(box.folder, registration, bytes);
    const afterChange = treeOf(box.stateHome);

    const ended = await server.exit();
    expectLost(ended, ready.epoch);
    expect(treeOf(box.stateHome)).toEqual(afterChange);
    expect(readFileSync(registration)).toEqual(bytes);

    // It no longer answers: the listener is closed, and status cannot call it running.
    const status = await cli(['status', ...box.place(workspace), '--json']);
    expect(status.code).toBe(3);
    expect(jsonLines(status.stdout)[0]!.status).toBe('unavailable');
    expect(treeOf(box.stateHome)).toEqual(afterChange);
  });

  it('exits 4 and touches nothing when a file is dropped into its service folder', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server, ready } = await box.serve(workspace, ['--watch-ms', '50']);
    const [service] = box.serviceFolders();
    writeFileSync(join(service!, 'extra.json'), '{}', { mode: 0o600, flag: 'wx' });
    const afterChange = treeOf(box.stateHome);

    const ended = await server.exit();
    expectLost(ended, ready.epoch);
    expect(treeOf(box.stateHome)).toEqual(afterChange);
  });

  it('says so to a person on stderr without --json, and still exits 4', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server, ready } = await box.serve(workspace, ['--watch-ms', '50'], false);
    expect(server.stdout.split('\n')).toEqual([
      `serving   ${workspace}`,
      `endpoint  ${ready.endpoint}`,
      `epoch     ${ready.epoch}`,
      `pid       ${server.pid}`,
      '',
      `Stop it with Ctrl-C, or: leasehold stop --workspace ${workspace} --state-home ${box.stateHome}`,
      '',
    ]);
    const [service] = box.serviceFolders();
    writeFileSync(join(service!, 'extra.json'), '{}', { mode: 0o600, flag: 'wx' });
    const afterChange = treeOf(box.stateHome);
    const ended = await server.exit();
    expect(ended.code).toBe(4);
    expect(ended.stderr).toMatch(
      /^leasehold: lost the workspace \(.+\); stopped serving without touching its files\n$/,
    );
    expect(ended.stdout).not.toContain('{');
    expect(treeOf(box.stateHome)).toEqual(afterChange);
  });

  it('exits 4 and touches nothing when the state home itself is replaced by a symbolic link', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server, ready } = await box.serve(workspace, ['--watch-ms', '50']);
    // The whole state home moved aside, and a link to it put in its place.
    const moved = join(box.folder, 'moved-state');
    renameSync(box.stateHome, moved);
    symlinkSync(moved, box.stateHome);
    const afterChange = treeOf(moved);

    const ended = await server.exit();
    expectLost(ended, ready.epoch);
    expect(treeOf(moved)).toEqual(afterChange);
    // Readers check the state home too: not running, and no access handed out.
    const status = await cli(['status', ...box.place(workspace), '--json']);
    expect(status.code).toBe(3);
    expect(json(status)).toMatchObject({ status: 'unavailable', reason: expect.stringContaining(box.stateHome) });
    expect(treeOf(moved)).toEqual(afterChange);

    rmSync(box.stateHome);
    renameSync(moved, box.stateHome);
  });

  it('exits 4 when the state home is opened to others (mode 755), and no workspace reads stopped', async () => {
    const box = sandbox();
    const quiet = box.workspace('quiet');
    const { server: first, ready: quietReady } = await box.serve(quiet);
    expect(json(await cli(['stop', ...box.place(quiet), '--json']))).toEqual({
      stopped: true,
      root: quiet,
      epoch: quietReady.epoch,
    });
    expect((await first.exit()).code).toBe(0);
    const workspace = box.workspace('ws');
    const { server, ready } = await box.serve(workspace, ['--watch-ms', '50']);
    chmodSync(box.stateHome, 0o755);

    expectLost(await server.exit(), ready.epoch);
    for (const root of [workspace, quiet]) {
      const status = await cli(['status', ...box.place(root), '--json']);
      expect(status.code).toBe(3);
      expect(json(status)).toMatchObject({ status: 'unavailable', reason: expect.stringContaining(box.stateHome) });
    }

    chmodSync(box.stateHome, 0o700);
    expect(json(await cli(['status', ...box.place(quiet), '--json']))).toEqual({
      status: 'stopped',
      ...onLocalDisk(box.stateHome),
      root: quiet,
      epoch: quietReady.epoch,
      config: expect.any(Object),
    });
  });
});
