import { readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveWorkspace } from '@leasehold/coordination';
import { codeBlocks, markdownSection } from '@leasehold/package-checks';
import { cleanUp, makeTemporaryFolder, spawnChild, untilGone, type SpawnedChild } from '@leasehold/test-utils';

afterEach(cleanUp);

const require = createRequire(import.meta.url);
const LEASEHOLD = join(dirname(require.resolve('@leasehold/cli/package.json')), 'dist', 'leasehold.cjs');
const TRANSPORT_README = join(dirname(require.resolve('@leasehold/transport/package.json')), 'README.md');
// This package's node_modules, so that a daemon written in a temp folder imports the packages by name.
const NODE_MODULES = fileURLToPath(new URL('../node_modules', import.meta.url));

/** The daemon and its client of the transport README, exactly as printed there. */
function readmeExamples(): { daemon: string; client: string } {
  const section = markdownSection(readFileSync(TRANSPORT_README, 'utf8'), '## A daemon to ship, and its client');
  const [daemon, client] = codeBlocks(section, 'ts');
  if (daemon === undefined || client === undefined)
    throw new Error(`${TRANSPORT_README}: no daemon and client example`);
  return { daemon, client };
}

interface Place {
  /** The workspace: the folder the daemon and client are saved in, and run from, as the README says. */
  readonly workspace: string;
  readonly stateHome: string;
  readonly env: NodeJS.ProcessEnv;
}

/**
 * A workspace folder holding the README's daemon and client (with this package's node_modules beside
 * them); `withoutRecoverDead`, the daemon of a team that left its `recoverDead` line out.
 */
function makePlace({ withoutRecoverDead = false } = {}): Place {
  const tmp = makeTemporaryFolder('leasehold-readme-daemon-');
  const workspace = resolveWorkspace(tmp);
  symlinkSync(NODE_MODULES, join(workspace, 'node_modules'));
  const { daemon, client } = readmeExamples();
  const lines = daemon.split('\n');
  const kept = withoutRecoverDead ? lines.filter((line) => !line.includes('recoverDead: true')) : lines;
  expect(lines.length - kept.length).toBe(withoutRecoverDead ? 1 : 0);
  writeFileSync(join(workspace, 'hello-daemon.mjs'), kept.join('\n'), { mode: 0o600 });
  writeFileSync(join(workspace, 'hello-client.mjs'), client, { mode: 0o600 });
  const stateHome = join(workspace, '.state');
  return { workspace, stateHome, env: { ...process.env, LEASEHOLD_STATE_HOME: stateHome } };
}

/** The README's client, run from the workspace's folder as a user runs it. */
function runClient(place: Place): SpawnedChild {
  return spawnChild(join(place.workspace, 'hello-client.mjs'), [], { env: place.env, cwd: place.workspace });
}

/** The real `leasehold ARGS --workspace W --json`, with the state home in its environment, to its end. */
async function leasehold(
  place: Place,
  ...args: string[]
): Promise<{ code: number | null; json: Record<string, unknown> }> {
  const child = spawnChild(LEASEHOLD, [...args, '--workspace', place.workspace, '--json'], { env: place.env });
  const { code } = await child.closed;
  return { code, json: JSON.parse(child.lines.join('\n')) as Record<string, unknown> };
}

/** The epoch each client printed once it called the owner's route, after every one ended (exit 0). */
async function helloEpochs(clients: readonly SpawnedChild[]): Promise<string[]> {
  const ends = await Promise.all(clients.map((client) => client.closed));
  expect(ends.map(({ code, stderr }) => ({ code, stderr: stderr.replace(/^waiting for .*\n/gm, '') }))).toEqual(
    clients.map(() => ({ code: 0, stderr: '' })),
  );
  return clients.map(
    (client) =>
      /^GET \/hello: 200, from the owner of epoch (\S+)$/.exec(client.lines.join('\n'))?.[1] ??
      `no hello in ${client.lines.join('|')}`,
  );
}

/** Kills the daemon the way a crash does (it is no child of this process), and waits until it is gone. */
async function killDaemon(pid: number): Promise<void> {
  process.kill(pid, 'SIGKILL');
  await untilGone(pid);
}

describe("the transport README's daemon and client, as printed, driven by real processes", () => {
  it('the client starts the daemon; after a kill -9, eight racing clients get one new owner that recovered the crashed one, with no person', async () => {
    const place = makePlace();
    const [first] = await helloEpochs([runClient(place)]);
    const running = await leasehold(place, 'status');
    expect(running).toMatchObject({ code: 0, json: { status: 'running', epoch: first, compatibility: 'hello/1' } });

    const crashed = Number(running.json.pid);
    await killDaemon(crashed);
    expect(await leasehold(place, 'status')).toMatchObject({ code: 3, json: { status: 'unavailable', pid: crashed } });

    const epochs = await helloEpochs(Array.from({ length: 8 }, () => runClient(place)));
    expect(new Set(epochs).size).toBe(1);
    expect(epochs[0]).not.toBe(first);
    const journal = await leasehold(place, 'journal');
    expect(journal.json.entries).toEqual([
      expect.objectContaining({
        root: place.workspace,
        automatic: expect.objectContaining({ reason: 'owner-proved-dead' }),
      }),
    ]);
    // The daemon's output is kept where the client's start put it.
    const log = readFileSync(join(place.workspace, 'hello-daemon.log'), 'utf8');
    expect(log).toContain(`serving ${place.workspace} at http://127.0.0.1:`);
    expect(log).toContain(`recovered: pid ${crashed} proved gone (`);

    expect(await leasehold(place, 'stop')).toMatchObject({ code: 0, json: { stopped: true } });
    expect(await leasehold(place, 'status')).toMatchObject({ code: 3, json: { status: 'stopped' } });
    expect(readFileSync(join(place.workspace, 'hello-daemon.log'), 'utf8')).toContain('stopped (stop)');
  });

  it('without recoverDead, after a kill -9, eight racing clients end at once with quarantine and its remedy, each daemon started was refused and logged why, and no start claim is left', async () => {
    const place = makePlace({ withoutRecoverDead: true });
    await helloEpochs([runClient(place)]);
    const crashed = Number((await leasehold(place, 'status')).json.pid);
    await killDaemon(crashed);

    const clients = Array.from({ length: 8 }, () => runClient(place));
    const ends = await Promise.all(clients.map((client) => client.closed));
    const recover = `leasehold recover --workspace ${place.workspace} --state-home ${place.stateHome}`;
    for (const { code, stderr } of ends) {
      expect(code).toBe(1);
      expect(stderr).toContain(`no hello: quarantine: ${place.workspace}: `);
      expect(stderr).toContain(`the fences of an owner whose process is gone, pid ${crashed} on host `);
      expect(stderr).toContain(recover);
    }
    // Each daemon a client started (the others waited on its claim and were told the same) was
    // refused, and said so with its remedy in the log.
    const starters = ends.filter(({ stderr }) => stderr.includes('the process start() launched (pid ')).length;
    expect(starters).toBeGreaterThanOrEqual(1);
    const log = readFileSync(join(place.workspace, 'hello-daemon.log'), 'utf8');
    expect(log.match(/^not serving: quarantine: /gm)).toHaveLength(starters);
    expect(log).toContain(recover);
    expect(readdirSync(join(place.stateHome, 'start-claims')).filter((name) => name !== '.staging')).toEqual([]);
    expect(await leasehold(place, 'status')).toMatchObject({ code: 3, json: { status: 'unavailable', pid: crashed } });
  });
});
