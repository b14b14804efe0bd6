import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cli, httpRequest, json, killAll, removeSandboxes, sandbox, type Result } from '../test/helpers.js';
import { capabilitiesSeen, capabilityLeaks, transcript } from '../test/transcript.js';

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

/** A sandbox with one workspace, its place options and its state-home option. */
function setting() {
  const box = sandbox();
  const workspace = box.workspace('ws');
  return { box, workspace, place: box.place(workspace), state: ['--state-home', box.stateHome] };
}

/** A served workspace whose owner was killed (kill -9): its fences stay; answers the setting, the capability and the recovery digest. */
async function crashed() {
  const given = setting();
  const { server } = await given.box.serve(given.workspace);
  const { capability } = given.box.capabilities()[0]!;
  await server.kill9();
  const digest = json(await cli(['recover', ...given.place, '--json'])).digest as string;
  return { ...given, capability, digest };
}

/** Every output so far, that the afterEach searches: this test's must be there to search. */
const transcriptGrew = (since: number) => expect(transcript.length).toBeGreaterThan(since);

// One test per state of a workspace's life (each its own sandbox), every command run in it in both modes; after
// each, the afterEach searches every output, answer and state file for every capability seen so far.
describe('the capability never leaves its file: no output of any command, in any mode, in any state, nor the journal', () => {
  it("while running: every command that reads the state, and the service's own errors", async () => {
    const { box, workspace, place, state } = setting();
    const since = transcript.length;
    const { ready } = await box.serve(workspace);
    const { capability } = box.capabilities()[0]!;
    expect(capability).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const host = `127.0.0.1:${new URL(ready.endpoint).port}`;
    for (const args of [
      ['status', ...place],
      ['list', ...state],
      ['recover', ...place],
      ['doctor', ...state],
      ['serve', ...place],
    ]) {
      await bothModes(args);
    }
    // Errors from the service itself, with a wrong token (which is half the right one) and the right one.
    await httpRequest(ready.endpoint, 'GET', '/v1/status', {
      host,
      authorization: `Bearer ${capability.slice(0, 20)}`,
    });
    await httpRequest(ready.endpoint, 'GET', '/v1/status', {
      host: 'evil.example',
      authorization: `Bearer ${capability}`,
    });
    await httpRequest(ready.endpoint, 'GET', '/v1/nowhere', { host, authorization: `Bearer ${capability}` });
    await httpRequest(ready.endpoint, 'GET', '/v1/status', { host, authorization: `Bearer ${capability}` });
    expect(capabilitiesSeen.has(capability)).toBe(true);
    transcriptGrew(since);
  });

  it('after a crash: status, list, the recovery review, refused recoveries, doctor, a refused serve and stop', async () => {
    const { place, state, capability, digest } = await crashed();
    const since = transcript.length;
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
    expect(capabilitiesSeen.has(capability)).toBe(true);
    transcriptGrew(since);
  });

  it('with a stray file that makes every read refuse: its errors name files, never their contents', async () => {
    const { box, place, state, digest } = await crashed();
    const since = transcript.length;
    const [service] = box.serviceFolders();
    writeFileSync(join(service!, 'stray'), 'x', { mode: 0o600 });
    for (const args of [
      ['status', ...place],
      ['recover', ...place],
      ['doctor', ...state],
      ['serve', ...place],
    ])
      await bothModes(args);
    await cli(['recover', ...place, '--digest', digest, '--yes', '--json']);
    transcriptGrew(since);
  });

  it('through a recovery, and in its journal record', async () => {
    const { box, place, capability, digest } = await crashed();
    const recovered = await cli(['recover', ...place, '--digest', digest, '--yes']);
    expect(recovered.code).toBe(0);
    const journal = join(box.namespace, 'journal');
    const records = readdirSync(journal).map((name) => readFileSync(join(journal, name), 'utf8'));
    expect(records).toHaveLength(1);
    for (const record of records) expect(record.includes(capability)).toBe(false);
  });

  it('serving again after a recovery, a lost lease, and a clean stop, in both modes of serve', async () => {
    const { box, workspace, place, digest } = await crashed();
    const since = transcript.length;
    const seen = capabilitiesSeen.size;
    expect((await cli(['recover', ...place, '--digest', digest, '--yes'])).code).toBe(0);
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
    // Two more owners served here, each with its own capability, and every one is searched for.
    expect(capabilitiesSeen.size - seen).toBe(2);
    transcriptGrew(since);
  });

  it('in usage errors and help', async () => {
    const { place } = await crashed();
    const since = transcript.length;
    await bothModes(['serve', ...place, '--endpoint', 'http://0.0.0.0:1']);
    await bothModes(['serve', ...place, '--watch-ms', 'soon']);
    await bothModes(['nonsense']);
    await cli(['status', '--help']);
    transcriptGrew(since);
  });
});
