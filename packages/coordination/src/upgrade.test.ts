import { existsSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { placeOptions, recoverRemedy } from '@leasehold/contracts';
import { PrivateFiles } from '@leasehold/private-files';
import { cleanUp, codeOfAsync, makePlace, spawnSharedFixture } from '@leasehold/test-utils';
import {
  ANY_PORT,
  BOUND,
  FIXTURE_MODULES,
  configFor,
  coordinationFor,
  policyBytes,
  unchangedCodeOf,
} from '../test/functional-helpers.js';
import { acquireWorkspace, inspectWorkspace, workspaceConfiguration, type Workspace } from './index.js';

afterEach(cleanUp);

// An upgrade: the next owner of a stopped workspace brings another config
// (another endpoint, or the policy of a new version). Without replaceConfig
// it is refused, naming the option; with it, the old service folder goes
// whole and the new config is published as a new workspace's, only while no
// fence remains.

/** The new version's config: another policy. */
const NEW_POLICY = configFor('http://127.0.0.1:0', 'the new version');

/** An acquire with `config`, publishing its policy as a new workspace's host-config.json. */
function acquireWith(coordination: Workspace, config = NEW_POLICY, replaceConfig = true) {
  const label = config === NEW_POLICY ? 'the new version' : 'policy';
  return acquireWorkspace(coordination, config, BOUND, (fresh) => fresh.writeHostConfig(policyBytes(label)), {
    replaceConfig,
  });
}

describe('an upgrade: a new config for a stopped workspace (replaceConfig)', () => {
  it('is refused without replaceConfig, naming it and the config file, and nothing changes', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'refused');
    await (
      await acquireWorkspace(coordination, ANY_PORT, BOUND, (fresh) => fresh.writeHostConfig(policyBytes()))
    ).release();
    const refusal = await acquireWith(coordination, NEW_POLICY, false).catch((error: unknown) => error);
    expect(refusal).toMatchObject({
      code: 'conflict',
      path: coordination.places.config,
      message: expect.stringContaining('replaceConfig'),
      remedy: expect.stringContaining(
        'start it with replaceConfig (the --replace-config option of leasehold serve and leasehold run)',
      ),
    });
    expect(await unchangedCodeOf(place.stateHome, () => acquireWith(coordination, NEW_POLICY, false))).toBe('conflict');
    expect(workspaceConfiguration(coordination)).toEqual(ANY_PORT);
  });

  it('takes the new config and policy on a stopped workspace, and acquires it as a new one', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'upgraded');
    const old = await acquireWorkspace(coordination, ANY_PORT, BOUND, (fresh) => fresh.writeHostConfig(policyBytes()));
    await old.release();
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: old.registration.epoch });

    const lease = await acquireWith(coordination);
    expect(workspaceConfiguration(coordination)).toEqual(NEW_POLICY);
    expect(readFileSync(coordination.places.hostConfig, 'utf8')).toBe(
      Buffer.from(policyBytes('the new version')).toString(),
    );
    expect(lease.registration.epoch).not.toBe(old.registration.epoch);
    await lease.release();
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
    // The same config again is no upgrade: replaceConfig changes nothing then.
    await (await acquireWith(coordination)).release();
    expect(workspaceConfiguration(coordination)).toEqual(NEW_POLICY);
  });

  it('takes another endpoint too (a config is its endpoint and its policy)', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'endpoint');
    await (await acquireWorkspace(coordination, ANY_PORT, BOUND)).release();
    const fixed = configFor(BOUND);
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, fixed, BOUND))).toBe('conflict');
    await (await acquireWorkspace(coordination, fixed, BOUND, undefined, { replaceConfig: true })).release();
    expect(workspaceConfiguration(coordination)).toEqual(fixed);
  });

  it('is refused while a fence remains: a live owner (conflict) and a crashed one (quarantine), changing nothing', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'fenced');
    const live = await acquireWorkspace(coordination, ANY_PORT, BOUND, (fresh) => fresh.writeHostConfig(policyBytes()));
    expect(await unchangedCodeOf(place.stateHome, () => acquireWith(coordination))).toBe('conflict');
    const options = placeOptions(coordination.root, place.stateHome);
    await expect(acquireWith(coordination)).rejects.toMatchObject({
      remedy: expect.stringContaining(`see it with \`leasehold status ${options}\``),
    });
    await live.release();

    // An owner in a child, killed: its row, registration, owner.lock, capability and checkout lock stay.
    const child = spawnSharedFixture(
      'crasher',
      {
        workspace: coordination.root,
        stateHome: place.stateHome,
        operation: 'acquire',
        config: ANY_PORT,
        endpoint: BOUND,
        killAt: 'end',
      },
      FIXTURE_MODULES,
    );
    await child.closed;
    const refusal = await acquireWith(coordination).catch((error: unknown) => error);
    expect(refusal).toMatchObject({
      code: 'quarantine',
      message: expect.stringContaining(`pid ${child.pid} on host`),
      remedy: recoverRemedy(coordination.root, place.stateHome, 'absent'),
    });
    expect(await unchangedCodeOf(place.stateHome, () => acquireWith(coordination))).toBe('quarantine');
    expect(workspaceConfiguration(coordination)).toEqual(ANY_PORT);
    expect(existsSync(coordination.places.ownerLock)).toBe(true);
  });

  it("refuses a service folder holding a file it does not know (the transport's own), changing nothing", async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'foreign');
    await (await acquireWorkspace(coordination, ANY_PORT, BOUND)).release();
    new PrivateFiles(place.stateHome).create(`${coordination.places.service}/access.json`, Buffer.from('{}'));
    expect(await unchangedCodeOf(place.stateHome, () => acquireWith(coordination))).toBe('conflict');
    expect(await codeOfAsync(() => acquireWith(coordination))).toBe('conflict');
    expect(workspaceConfiguration(coordination)).toEqual(ANY_PORT);
  });
});

describe('an upgrade through a crash', () => {
  it('a process killed between the old folder going and the new one coming leaves a workspace with no fence, which the next acquire takes', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'crashed-upgrade');
    await (await acquireWorkspace(coordination, ANY_PORT, BOUND)).release();
    // Killed right after the old service folder was renamed into staging: nothing of it is left in place.
    const child = spawnSharedFixture(
      'crasher',
      {
        workspace: coordination.root,
        stateHome: place.stateHome,
        operation: 'acquire',
        config: NEW_POLICY,
        endpoint: BOUND,
        replaceConfig: true,
        killBefore: { operation: 'remove-folder', action: 'fsync-directory' },
      },
      FIXTURE_MODULES,
    );
    expect(await child.closed).toMatchObject({ signal: 'SIGKILL' });
    expect(existsSync(coordination.places.service)).toBe(false);
    // Its registry lock is taken over by the next writer; the row was never written (the folder goes first).
    expect(inspectWorkspace(coordination)).toEqual({ status: 'absent' });
    await (await acquireWith(coordination)).release();
    expect(workspaceConfiguration(coordination)).toEqual(NEW_POLICY);
  });
});
