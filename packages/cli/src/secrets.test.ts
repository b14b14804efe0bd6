import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  capabilitiesSeen,
  capabilityLeaks,
  cli,
  httpRequest,
  json,
  killAll,
  removeSandboxes,
  sandbox,
  transcript,
  type Result,
} from '../test/helpers.js';

afterEach(async () => {
  await killAll();
  removeSandboxes();
  // After every test, alone or not: no capability seen so far is in any output, answer or state file.
  expect(capabilityLeaks()).toEqual([]);
});

/** Runs `leasehold ARGS` with and without --json. */
async function bothModes(args: readonly string[]): Promise<Result[]> {
  return [await cli(args), await cli([...args, '--json'])];
}

describe('the capability never leaves its file', () => {
  it('appears in no output of any command, in any mode, in any state, nor in the journal', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const place = box.place(workspace);
    const state = ['--state-home', box.stateHome];

    // Running: every command that reads the state, in both modes.
    const { server: first, ready } = await box.serve(workspace);
    const { capability } = box.capabilities()[0]!;
    expect(capability).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const host = `127.0.0.1:${new URL(ready.endpoint).port}`;
    for (const args of [['status', ...place], ['list', ...state], ['recover', ...place], ['doctor', ...state], ['serve', ...place]]) {
      await bothModes(args);
    }
    // Errors from the service itself, with a wrong token (which is half the right one) and the right one.
    await httpRequest(ready.endpoint, 'GET', '/v1/status', { host, authorization: `Bearer ${capability.slice(0, 20)}` });
    await httpRequest(ready.endpoint, 'GET', '/v1/status', { host: 'evil.example', authorization: `Bearer ${capability}` });
    await httpRequest(ready.endpoint, 'GET', '/v1/nowhere', { host, authorization: `Bearer ${capability}` });
    await httpRequest(ready.endpoint, 'GET', '/v1/status', { host, authorization: `Bearer ${capability}` });

    // Crashed: status, list, the recovery review, a refused recovery, doctor and a refused serve.
    await first.kill9();
    const review = json(await cli(['recover', ...place, '--json']));
    const digest = review.digest as string;
    for (const args of [
      ['status', ...place],
      ['list', ...state],
      ['recover', ...place],
      ['recover', ...place, '--digest', '0'.repeat(64), '--yes'],
      ['recover', ...place, '--digest', 'not-a-digest', '--yes'],
      ['recover', ...place, '--digest', digest],
      ['doctor', ...state],
      ['serve', ...place],
      ['stop', ...place],
    ]) {
      await bothModes(args);
    }
    // A stray file makes every read refuse: its errors name files, never their contents.
    const [service] = box.serviceFolders();
    writeFileSync(join(service!, 'stray'), 'x', { mode: 0o600 });
    for (const args of [['status', ...place], ['recover', ...place], ['doctor', ...state], ['serve', ...place]]) await bothModes(args);
    await cli(['recover', ...place, '--digest', digest, '--yes', '--json']);
    await box.shell(`rm ${join(service!, 'stray')}`);

    // Recovery, and its journal record.
    const recovered = await cli(['recover', ...place, '--digest', json(await cli(['recover', ...place, '--json'])).digest as string, '--yes']);
    expect(recovered.code).toBe(0);
    const journal = join(box.namespace, 'journal');
    const records = readdirSync(journal).map((name) => readFileSync(join(journal, name), 'utf8'));
    expect(records).toHaveLength(1);
    for (const record of records) expect(record.includes(capability)).toBe(false);

    // Serving again, a lost lease, and a clean stop, in both modes of serve.
    const { server: second } = await box.serve(workspace, ['--watch-ms', '50']);
    const [secondService] = box.serviceFolders();
    writeFileSync(join(secondService!, 'extra'), 'x', { mode: 0o600 });
    expect((await second.exit()).code).toBe(4);
    await box.shell(`rm ${join(secondService!, 'extra')}`);
    const afterLoss = json(await cli(['recover', ...place, '--json']));
    await cli(['recover', ...place, '--digest', afterLoss.digest as string, '--yes']);
    const { server: third } = await box.serve(workspace, [], false);
    await bothModes(['status', ...place]);
    await cli(['stop', ...place]);
    expect((await third.exit()).code).toBe(0);
    await bothModes(['status', ...place]);
    await bothModes(['stop', ...place]);

    // Usage errors and help.
    await bothModes(['serve', ...place, '--endpoint', 'http://0.0.0.0:1']);
    await bothModes(['serve', ...place, '--watch-ms', 'soon']);
    await bothModes(['nonsense']);
    await cli(['status', '--help']);

    expect(capabilitiesSeen.size).toBeGreaterThanOrEqual(3);
    expect(transcript.length).toBeGreaterThan(100);
    expect(capabilityLeaks()).toEqual([]);
  });
});
