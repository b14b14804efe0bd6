import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveWorkspace } from '@leasehold/coordination';
import { cleanUp, killAndReap, makeTemporaryFolder, spawnChild, type SpawnedChild } from '@leasehold/test-utils';

afterEach(cleanUp);

const require = createRequire(import.meta.url);
const LEASEHOLD = join(dirname(require.resolve('@leasehold/cli/package.json')), 'dist', 'leasehold.cjs');
const TRANSPORT_README = join(dirname(require.resolve('@leasehold/transport/package.json')), 'README.md');
// This package's node_modules, so that a daemon written in a temp folder imports the packages by name.
const NODE_MODULES = fileURLToPath(new URL('../node_modules', import.meta.url));

/** The twenty-line daemon of the transport README, exactly as printed there. */
function readmeDaemon(): string {
  const readme = readFileSync(TRANSPORT_README, 'utf8');
  const section = readme.slice(readme.indexOf('## A daemon in twenty lines'));
  const code = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  if (code === undefined) throw new Error(`${TRANSPORT_README}: no daemon example`);
  return code;
}

interface Place {
  readonly script: string;
  readonly workspace: string;
  readonly stateHome: string;
}

/** A temp folder holding the README's daemon (with this package's node_modules beside it) and a workspace. */
function makePlace(): Place {
  const tmp = makeTemporaryFolder('leasehold-readme-daemon-');
  symlinkSync(NODE_MODULES, join(tmp, 'node_modules'));
  const script = join(tmp, 'daemon.mjs');
  writeFileSync(script, readmeDaemon(), { mode: 0o600 });
  const workspace = join(tmp, 'workspace');
  mkdirSync(workspace, { mode: 0o700 });
  return { script, workspace: resolveWorkspace(workspace), stateHome: join(tmp, 'state') };
}

/** Starts the README's daemon with the state home in its environment, as a user would run it. */
function startDaemon(place: Place): SpawnedChild {
  const before = process.env.LEASEHOLD_STATE_HOME;
  process.env.LEASEHOLD_STATE_HOME = place.stateHome;
  try {
    return spawnChild(place.script, [place.workspace]);
  } finally {
    if (before === undefined) delete process.env.LEASEHOLD_STATE_HOME;
    else process.env.LEASEHOLD_STATE_HOME = before;
  }
}

/** The real `leasehold ARGS --workspace W --state-home S --json`, to its end: its exit code and JSON answer. */
async function leasehold(place: Place, ...args: string[]): Promise<{ code: number | null; json: Record<string, unknown> }> {
  const child = spawnChild(LEASEHOLD, [...args, '--workspace', place.workspace, '--state-home', place.stateHome, '--json']);
  const { code } = await child.closed;
  return { code, json: JSON.parse(child.lines.join('\n')) as Record<string, unknown> };
}

describe("the transport README's twenty-line daemon, driven by the real leasehold binary", () => {
  it('is running, stops with leasehold stop, and after kill -9 reads unavailable until leasehold recover', async () => {
    const place = makePlace();
    const first = startDaemon(place);
    await first.line((line) => line.startsWith(`serving ${place.workspace} at http://127.0.0.1:`));
    expect(await leasehold(place, 'status')).toMatchObject({ code: 0, json: { status: 'running' } });
    expect(await leasehold(place, 'stop')).toMatchObject({ code: 0, json: { stopped: true } });
    expect(await first.line('stopped (stop)')).toBe('stopped (stop)');
    expect((await first.closed).code).toBe(0);
    expect(await leasehold(place, 'status')).toMatchObject({ code: 3, json: { status: 'stopped' } });

    const second = startDaemon(place);
    await second.line((line) => line.startsWith('serving '));
    expect(await killAndReap(second)).toMatchObject({ signal: 'SIGKILL' });
    expect(await leasehold(place, 'status')).toMatchObject({ code: 3, json: { status: 'unavailable' } });
    const review = await leasehold(place, 'recover');
    expect(review).toMatchObject({ code: 0, json: { ownerStatus: 'absent' } });
    const digest = String(review.json.digest);
    expect(await leasehold(place, 'recover', '--digest', digest, '--yes')).toMatchObject({ code: 0, json: { recovered: true } });
    expect(await leasehold(place, 'status')).toMatchObject({ code: 3, json: { status: 'stopped' } });
  });
});
