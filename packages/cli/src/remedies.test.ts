import { afterEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REGISTRY_ENTRIES, encode } from '@leasehold/contracts';
import { pathExists, stopProcess } from '@leasehold/test-utils';
import {
  Background,
  BIN,
  cli,
  json,
  killAll,
  manyOwners,
  registryWriter,
  removeSandboxes,
  sandbox,
  type Result,
  type Sandbox,
  onLocalDisk,
} from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

// Every remedy the command prints names a command that works in the state it was printed in: each
// test reaches a state, takes the command the output suggests, runs it as a person would (pasted
// into a shell, with this sandbox's `leasehold` on PATH) and checks that it did not fail the same way.

afterEach(async () => {
  await killAll();
  removeSandboxes();
  expect(capabilityLeaks()).toEqual([]);
});

/** The command a person's output suggests: what follows `prefix` on its last line that has it. */
function suggested(text: string, prefix: string): string {
  const line = text
    .split('\n')
    .filter((candidate) => candidate.includes(prefix))
    .at(-1);
  if (line === undefined) throw new Error(`no "${prefix}" in:\n${text}`);
  return line.slice(line.indexOf(prefix) + prefix.length).trim();
}

/** `leasehold status` for a person, in `folder`. */
function statusText(box: Sandbox, folder: string): Promise<Result> {
  return cli(['status', ...box.place(folder)]);
}

/** Runs a suggested `leasehold serve …` in the background until it is ready (it serves until stopped). */
async function serveSuggested(box: Sandbox, command: string): Promise<Background> {
  const words = command.split(' ');
  expect(words.slice(0, 2)).toEqual(['leasehold', 'serve']);
  const server = new Background(process.execPath, [BIN, ...words.slice(1), '--json']);
  await server.until((stdout) => (stdout.includes('"event":"ready"') ? true : undefined), 'ready line');
  box.recordCapabilities();
  return server;
}

/** A sandbox whose workspace `ws` was served and then killed with SIGKILL: its fences stay, its process is gone. */
async function crashedWorkspace(): Promise<{ box: Sandbox; workspace: string; server: Background }> {
  const box = sandbox();
  const workspace = box.workspace('ws');
  const { server } = await box.serve(workspace);
  await server.kill9();
  return { box, workspace, server };
}

/** A sandbox whose workspace `ws` was served and stopped: a registry, and a stopped service folder. */
async function stoppedWorkspace(): Promise<{ box: Sandbox; workspace: string }> {
  const box = sandbox();
  const workspace = box.workspace('ws');
  const { server } = await box.serve(workspace);
  expect((await cli(['stop', ...box.place(workspace)])).code).toBe(0);
  expect((await server.exit()).code).toBe(0);
  return { box, workspace };
}

describe("status's next step works in the state it names", () => {
  it('absent: the serve it suggests serves; running: the stop it suggests stops', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const absent = await statusText(box, workspace);
    expect(absent.code).toBe(3);
    const server = await serveSuggested(box, suggested(absent.stdout, 'Start it with: '));
    const running = await statusText(box, workspace);
    expect(running.code).toBe(0);
    expect((await box.shell(suggested(running.stdout, 'Stop it with: '))).code).toBe(0);
    expect((await server.exit()).code).toBe(0);
  });

  it('a crashed owner: the review it suggests shows the digest, whose recovery works, then the serve it suggests serves', async () => {
    const { box, workspace } = await crashedWorkspace();
    const crashed = await statusText(box, workspace);
    expect(crashed.code).toBe(3);
    const review = await box.shell(suggested(crashed.stdout, 'review what it left with: '));
    expect(review.code).toBe(0);
    const recovery = suggested(review.stdout, 'To recover: ');
    expect((await box.shell(recovery)).code).toBe(0);
    // The same line again (a script that retries): nothing is left, and that is no error.
    const repeated = await box.shell(recovery);
    expect(repeated.code).toBe(0);
    expect(repeated.stdout).toContain(`nothing to recover for ${workspace}`);
    const stopped = await statusText(box, workspace);
    expect(stopped.stdout).toMatch(/^stopped /);
    const next = await serveSuggested(box, suggested(stopped.stdout, 'Start it with: '));
    expect((await cli(['stop', ...box.place(workspace)])).code).toBe(0);
    expect((await next.exit()).code).toBe(0);
  });

  it('inside a served workspace: it answers about that workspace, and the stop it suggests stops it', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const inner = box.workspace('ws/src/lib');
    const { server, ready } = await box.serve(workspace);
    const machine = await cli(['status', ...box.place(inner), '--json']);
    expect(machine.code).toBe(0);
    expect(json(machine)).toMatchObject({
      status: 'running',
      root: workspace,
      folder: inner,
      epoch: ready.epoch,
      pid: server.pid,
    });
    const human = await statusText(box, inner);
    expect(human.stdout).toContain(`folder      ${inner} (inside this workspace)`);
    expect((await box.shell(suggested(human.stdout, 'Stop it with: '))).code).toBe(0);
    expect((await server.exit()).code).toBe(0);
  });

  it('above served workspaces: it names them instead of suggesting a serve that would overlap, and its suggestion answers', async () => {
    const box = sandbox();
    const parent = box.workspace('projects');
    const child = box.workspace('projects/app');
    const { server } = await box.serve(child);
    const machine = await cli(['status', ...box.place(parent), '--json']);
    expect(machine.code).toBe(3);
    expect(json(machine)).toEqual({
      status: 'absent',
      ...onLocalDisk(box.stateHome),
      root: parent,
      epoch: null,
      inside: [{ root: child, ownerStatus: 'live' }],
    });
    const human = await statusText(box, parent);
    expect(human.stdout).not.toContain('leasehold serve');
    const asked = await box.shell(suggested(human.stdout, 'ask about one with: '));
    expect(asked.code).toBe(0);
    expect(asked.stdout).toMatch(/^running +/);
    expect((await cli(['stop', ...box.place(child)])).code).toBe(0);
    expect((await server.exit()).code).toBe(0);
  });
});

describe("stop's answer works in the state it was given", () => {
  it('a crashed owner is quarantine, not "start it with serve", and the recovery it suggests works', async () => {
    const { box, workspace, server } = await crashedWorkspace();
    const stopped = await cli(['stop', ...box.place(workspace), '--json']);
    expect(stopped.code).toBe(1);
    expect(json(stopped)).toEqual({
      error: 'quarantine',
      message: expect.stringContaining(`pid ${server.pid} on host`),
      remedy: `review and release what it left with: leasehold recover --workspace ${workspace} --state-home ${box.stateHome}`,
    });
    const review = await box.shell(suggested(json(stopped).remedy as string, 'with: '));
    expect(review.code).toBe(0);
    expect((await box.shell(suggested(review.stdout, 'To recover: '))).code).toBe(0);
  });

  it('inside a served workspace it stops that workspace; above one it stops nothing and names it', async () => {
    const box = sandbox();
    const parent = box.workspace('projects');
    const child = box.workspace('projects/app');
    const inner = box.workspace('projects/app/src');
    const { server, ready } = await box.serve(child);
    const above = await cli(['stop', ...box.place(parent), '--json']);
    expect(above.code).toBe(0);
    expect(json(above)).toEqual({ stopped: true, root: parent, epoch: null, inside: [child] });
    expect(json(await cli(['status', ...box.place(child), '--json'])).status).toBe('running');
    const fromInside = await cli(['stop', ...box.place(inner), '--json']);
    expect(fromInside.code).toBe(0);
    expect(json(fromInside)).toEqual({ stopped: true, root: child, epoch: ready.epoch });
    expect((await server.exit()).code).toBe(0);
  });
});

/** The commands a remedy names between backticks, in order. */
function commandsIn(remedy: string): string[] {
  return [...remedy.matchAll(/`(leasehold [^`]+)`/g)].map((match) => match[1]!);
}

describe("serve's refusals name commands that work where they were met", () => {
  it('another owner (conflict): the status and list it names answer about that owner', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server } = await box.serve(workspace);
    const refused = await cli(['serve', ...box.place(workspace), '--json']);
    expect(refused.code).toBe(1);
    const { error, remedy } = json(refused) as { error: string; remedy: string };
    expect(error).toBe('conflict');
    const [status, list] = commandsIn(remedy);
    expect(status).toBe(`leasehold status --workspace ${workspace} --state-home ${box.stateHome}`);
    const answered = await box.shell(status!);
    expect(answered.code).toBe(0);
    expect(answered.stdout).toContain(`pid         ${server.pid}`);
    expect((await box.shell(list!)).stdout).toContain(workspace);
    expect((await cli(['stop', ...box.place(workspace)])).code).toBe(0);
    expect((await server.exit()).code).toBe(0);
  });

  it('a crashed owner (quarantine): the status and the recovery review it names work, and its digest recovers', async () => {
    const { box, workspace } = await crashedWorkspace();
    const refused = await cli(['serve', ...box.place(workspace), '--json']);
    const { error, remedy } = json(refused) as { error: string; remedy: string };
    expect(error).toBe('quarantine');
    const [status, review] = commandsIn(remedy);
    expect((await box.shell(status!)).stdout).toContain("Its owner's process is gone");
    const reviewed = await box.shell(review!);
    expect(reviewed.code).toBe(0);
    expect((await box.shell(suggested(reviewed.stdout, 'To recover: '))).code).toBe(0);
  });
});

describe('an owner that does not answer, and a registry held by another command', () => {
  it('a stopped (SIGSTOP) owner: stop is unavailable naming its pid, and the ending and recovery it suggests work', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server } = await box.serve(workspace);
    await stopProcess(server.pid);
    const status = await statusText(box, workspace);
    expect(status.stdout).toContain(`end that process (pid ${server.pid})`);
    const stopped = await cli(['stop', ...box.place(workspace), '--json']);
    expect(stopped.code).toBe(1);
    const { error, message, remedy } = json(stopped) as { error: string; message: string; remedy: string };
    expect({ error, message }).toEqual({
      error: 'unavailable',
      message: expect.stringContaining(`pid ${server.pid} on host`),
    });
    expect(remedy).toContain(`kill ${server.pid}`);
    // As it says: end that process, then the recovery it names.
    await server.kill9();
    const review = await box.shell(suggested(remedy, 'then: '));
    expect(review.code).toBe(0);
    expect((await box.shell(suggested(review.stdout, 'To recover: '))).code).toBe(0);
  });

  it('a registry held by a live command: busy, "try again in a moment", and the same command works once it is done', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const writer = await registryWriter(box.stateHome, box.workspace('other'));
    const refused = await cli(['serve', ...box.place(workspace), '--json']);
    expect(refused.code).toBe(1);
    expect(json(refused)).toMatchObject({ error: 'busy', remedy: expect.stringContaining('try again in a moment') });
    await writer.kill9();
    const { server } = await box.serve(workspace);
    expect((await cli(['stop', ...box.place(workspace)])).code).toBe(0);
    expect((await server.exit()).code).toBe(0);
  });
});

describe('a registry lock whose holder this host cannot tell', () => {
  it('serve is quarantine naming the lock, and the doctor it names reports that lock with its fix', async () => {
    const { box, workspace } = await stoppedWorkspace();
    const lock = join(box.namespace, 'registry', 'registry.lock');
    const holder = {
      schema: 'leasehold.registry-lock/1',
      token: randomUUID(),
      pid: 4242,
      host: 'build-7.other-host.invalid',
      root: box.workspace('elsewhere'),
    };
    writeFileSync(lock, encode(holder), { mode: 0o600, flag: 'wx' });
    const refused = await cli(['serve', ...box.place(workspace), '--json']);
    expect(refused.code).toBe(1);
    const answer = json(refused) as { error: string; path: string; remedy: string };
    expect(answer).toMatchObject({ error: 'quarantine', path: lock });
    const [doctor] = commandsIn(answer.remedy);
    expect(doctor).toBe(`leasehold doctor --state-home ${box.stateHome}`);
    const found = await box.shell(doctor!);
    expect(found.code).toBe(3);
    expect(found.stdout).toContain(`${lock}\n  problem:   held by pid 4242 on ${holder.host}`);
    expect(found.stdout).toContain(`fix:       make sure that process is gone, then: rm ${lock}`);
  });
});

describe('a full registry', () => {
  it('capacity names the list of what fills it; recovering one crashed owner it shows frees a row, and the serve then serves', async () => {
    const box = sandbox();
    const { owner, roots } = await manyOwners(box, REGISTRY_ENTRIES);
    await owner.kill9();
    const workspace = box.workspace('ws');
    const refused = await cli(['serve', ...box.place(workspace), '--json']);
    expect(refused.code).toBe(1);
    const answer = json(refused);
    expect(answer).toMatchObject({ error: 'capacity' });
    const listing = await box.shell(`${/`(leasehold list [^`]+)`/.exec(answer.remedy as string)![1]} --json`);
    expect(listing.code).toBe(0);
    const { entries } = json(listing) as { entries: Array<{ root: string; status: string; reasonCode?: string }> };
    expect(entries.map(({ root }) => root)).toEqual([...roots].sort());
    expect(new Set(entries.map(({ status, reasonCode }) => `${status} (${reasonCode})`))).toEqual(
      new Set(['unavailable (owner-gone)']),
    );
    const review = await cli(['recover', ...box.place(roots[0]!)]);
    expect(review.code).toBe(0);
    expect((await box.shell(suggested(review.stdout, 'To recover: '))).code).toBe(0);
    const { server } = await box.serve(workspace);
    expect((await cli(['stop', ...box.place(workspace)])).code).toBe(0);
    expect((await server.exit()).code).toBe(0);
  });
});

describe('a file of the state home that cannot be read', () => {
  it('status names doctor, and the doctor it names reports that file with its fix', async () => {
    const { box, workspace } = await stoppedWorkspace();
    const registration = join(box.serviceFolders()[0]!, 'registration.json');
    writeFileSync(registration, '{"schema":');
    const answer = await statusText(box, workspace);
    expect(answer.code).toBe(3);
    const doctor = await box.shell(suggested(answer.stdout, 'cannot be read as a state: '));
    expect(doctor.code).toBe(3);
    expect(doctor.stdout).toContain(`${registration}\n  workspace: ${workspace}\n  problem:   unreadable: `);
    expect(doctor.stdout).toContain(`fix:       repair or restore ${registration} by hand`);
  });
});

describe("recover's answer to a digest that does not match", () => {
  it('says it does not match the state shown now, changes nothing, and its remedy shows the current digest', async () => {
    const { box, workspace } = await crashedWorkspace();
    const other = '0'.repeat(64);
    const refused = await cli(['recover', ...box.place(workspace), '--digest', other, '--yes', '--json']);
    expect(refused.code).toBe(1);
    const answer = json(refused);
    expect(answer).toEqual({
      error: 'conflict',
      message: `${workspace}: --digest ${other} does not match the state shown now (it changed since, or the digest was mistyped); nothing changed`,
      remedy: `see the current state and its digest: leasehold recover --workspace ${workspace} --state-home ${box.stateHome}`,
    });
    const review = await box.shell(suggested(answer.remedy as string, 'its digest: '));
    expect(review.code).toBe(0);
    expect((await box.shell(suggested(review.stdout, 'To recover: '))).code).toBe(0);
  });
});

describe('a usage error names the command line that works', () => {
  it('options before the command: the command line of the remedy runs', async () => {
    const box = sandbox();
    const refused = await cli(['--json', '--state-home', box.stateHome, 'list']);
    expect(refused.code).toBe(2);
    const fixed = await box.shell(suggested(json(refused).remedy as string, 'run: '));
    expect(fixed.code).toBe(0);
    expect(json(fixed)).toEqual({ entries: [] });
  });

  it('init with half of the etcd options, or values that are not a URL and a key prefix, exits 2 and creates nothing', async () => {
    const box = sandbox();
    for (const options of [
      ['--etcd-endpoints', 'http://127.0.0.1:2379'],
      ['--etcd-endpoints', 'ftp://x', '--etcd-prefix', 'nope'],
    ]) {
      const refused = await cli(['init', '--state-home', box.stateHome, ...options, '--json']);
      expect(refused.code).toBe(2);
      expect(json(refused)).toMatchObject({
        error: 'usage',
        remedy: expect.stringContaining('--etcd-prefix a key prefix such as /leasehold/team'),
      });
    }
    expect(pathExists(box.stateHome)).toBe(false);
  });
});
