import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bytesOf, cleanUp, codeOf, codeOfAsync, makePlace, modeOf } from '@leasehold/test-utils';
import {
  ANY_PORT,
  BOUND,
  configFor,
  coordinationFor,
  makeWorkspace,
  policyBytes,
  readJson,
  registryPaths,
  registryRows,
  stateTreeOf,
  unchangedCodeOf,
} from '../test/functional-helpers.js';
import {
  acquireWorkspace,
  initializeWorkspace,
  inspectWorkspace,
  openWorkspace,
  workspaceConfiguration,
  workspaceLocalAccess,
  type NewWorkspace,
} from './index.js';

afterEach(cleanUp);

const CAPABILITY = /^[A-Za-z0-9_-]{43}$/;

describe('the life of a workspace', () => {
  it('goes absent, held, stopping, stopped, and held again with a new epoch', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'life');
    expect(inspectWorkspace(coordination)).toEqual({ status: 'absent' });
    expect(codeOf(() => workspaceLocalAccess(coordination))).toBe('unavailable');
    expect(workspaceConfiguration(coordination)).toBeUndefined();

    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    const first = lease.registration.epoch;
    expect(lease.registration).toMatchObject({
      root: coordination.root,
      stateHome: place.stateHome,
      endpoint: BOUND,
      phase: 'idle',
      pid: process.pid,
    });
    const held = inspectWorkspace(coordination);
    expect(held.status).toBe('unavailable');
    if (held.status !== 'unavailable') throw new Error('unreachable');
    expect(held.reason.startsWith('idle')).toBe(true);
    expect(held.owner).toEqual({
      epoch: first,
      endpoint: BOUND,
      pid: process.pid,
      host: lease.registration.host,
      phase: 'idle',
      process: 'live',
      version: 1,
    });
    const access = workspaceLocalAccess(coordination);
    expect(access.endpoint).toBe(BOUND);
    expect(access.epoch).toBe(first);
    expect(access.capability).toMatch(CAPABILITY);
    expect(Object.keys(access).sort()).toEqual(['capability', 'endpoint', 'epoch']);
    expect(workspaceConfiguration(coordination)).toEqual(ANY_PORT);
    lease.assert();

    lease.phase('stopping');
    expect(inspectWorkspace(coordination)).toEqual({
      status: 'stopping',
      owner: {
        epoch: first,
        endpoint: BOUND,
        pid: process.pid,
        host: lease.registration.host,
        phase: 'stopping',
        process: 'live',
        version: 2,
      },
    });
    expect(workspaceLocalAccess(coordination).epoch).toBe(first);

    await lease.release();
    expect(inspectWorkspace(coordination)).toEqual({ status: 'stopped', epoch: first, version: 3 });
    expect(codeOf(() => workspaceLocalAccess(coordination))).toBe('unavailable');
    expect(registryRows(place.stateHome)).toEqual([]);
    expect(existsSync(coordination.places.ownerLock)).toBe(false);
    expect(existsSync(coordination.places.capability)).toBe(false);
    expect(existsSync(coordination.places.checkoutLock)).toBe(false);
    expect(existsSync(registryPaths(place.stateHome).lock)).toBe(false);
    expect(readJson(coordination.places.registration).phase).toBe('stopped');

    // The released lease answers `unavailable` to everything, and touches nothing.
    const released = stateTreeOf(place.stateHome);
    expect(codeOf(() => lease.assert())).toBe('unavailable');
    expect(codeOf(() => lease.phase('idle'))).toBe('unavailable');
    expect(await codeOfAsync(() => lease.release())).toBe('unavailable');
    expect(stateTreeOf(place.stateHome)).toEqual(released);

    const again = await acquireWorkspace(coordination, ANY_PORT, 'http://127.0.0.1:40002');
    const second = again.registration.epoch;
    expect(second).not.toBe(first);
    const reheld = inspectWorkspace(coordination);
    expect(reheld).toMatchObject({
      status: 'unavailable',
      owner: { epoch: second, endpoint: 'http://127.0.0.1:40002', phase: 'idle' },
    });
    if (reheld.status !== 'unavailable') throw new Error('unreachable');
    expect(reheld.reason.startsWith('idle')).toBe(true);
    expect(workspaceLocalAccess(coordination).capability).not.toBe(access.capability);
    await again.release();
    expect(inspectWorkspace(coordination)).toEqual({ status: 'stopped', epoch: second, version: 2 });
  });

  it('answers quarantined for phase quarantined, and refuses phase stopped', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'quarantined');
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    lease.phase('quarantined');
    expect(inspectWorkspace(coordination)).toMatchObject({
      status: 'quarantined',
      owner: { epoch: lease.registration.epoch, phase: 'quarantined' },
    });
    const before = stateTreeOf(place.stateHome);
    expect(codeOf(() => lease.phase('stopped' as 'idle'))).toBe('refused');
    expect(stateTreeOf(place.stateHome)).toEqual(before);
    lease.phase('idle');
    expect(inspectWorkspace(coordination).status).toBe('unavailable');
    await lease.release();
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
  });

  it('writes every file 0600 and every folder 0700', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'modes');
    await acquireWorkspace(coordination, ANY_PORT, BOUND);
    for (const [name, entry] of Object.entries(stateTreeOf(place.stateHome))) {
      if (name === '.') continue;
      expect({ name, mode: entry.mode & 0o7777 }).toEqual({ name, mode: entry.kind === 'folder' ? 0o700 : 0o600 });
    }
    expect(modeOf(place.stateHome)).toBe(0o700);
  });
});

describe('endpoints', () => {
  it('accepts an any-port config with a concrete bound endpoint, and records the bound one', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'any-port');
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    expect(lease.registration.endpoint).toBe(BOUND);
    expect(readJson(coordination.places.registration).endpoint).toBe(BOUND);
    expect(registryRows(place.stateHome).map((row) => row.endpoint)).toEqual([BOUND]);
    expect(readJson(coordination.places.config).endpoint).toBe('http://127.0.0.1:0');
    expect(workspaceLocalAccess(coordination).endpoint).toBe(BOUND);
  });

  it('accepts a concrete config with the bound endpoint left out or equal', async () => {
    const place = makePlace('coordination');
    const concrete = configFor('http://[::1]:40003');
    const first = coordinationFor(place, 'concrete-default');
    const lease = await acquireWorkspace(first, concrete);
    expect(lease.registration.endpoint).toBe('http://[::1]:40003');
    await lease.release();
    const again = await acquireWorkspace(first, concrete, 'http://[::1]:40003');
    expect(again.registration.endpoint).toBe('http://[::1]:40003');
  });

  const refusedEndpoints: readonly { name: string; endpoint: string; bound: string | undefined }[] = [
    { name: 'an any-port config without a bound endpoint', endpoint: 'http://127.0.0.1:0', bound: undefined },
    { name: 'an any-port config bound to port 0', endpoint: 'http://127.0.0.1:0', bound: 'http://127.0.0.1:0' },
    { name: 'an any-port config bound on another host', endpoint: 'http://127.0.0.1:0', bound: 'http://[::1]:40001' },
    { name: 'an IPv6 any-port config bound on IPv4', endpoint: 'http://[::1]:0', bound: 'http://127.0.0.1:40001' },
    { name: 'a concrete config bound to port 0', endpoint: 'http://127.0.0.1:40001', bound: 'http://127.0.0.1:0' },
    {
      name: 'a concrete config bound on another port',
      endpoint: 'http://127.0.0.1:40001',
      bound: 'http://127.0.0.1:40002',
    },
    {
      name: 'a concrete config bound on another host',
      endpoint: 'http://127.0.0.1:40001',
      bound: 'http://[::1]:40001',
    },
    { name: 'a bound endpoint that is not loopback', endpoint: 'http://127.0.0.1:0', bound: 'http://10.0.0.1:40001' },
    { name: 'a bound endpoint with a leading zero', endpoint: 'http://127.0.0.1:0', bound: 'http://127.0.0.1:040001' },
  ];

  for (const { name, endpoint, bound } of refusedEndpoints) {
    it(`refuses ${name} (conflict) before creating the state home`, async () => {
      const place = makePlace('coordination');
      const coordination = coordinationFor(place, 'endpoint');
      expect(await codeOfAsync(() => acquireWorkspace(coordination, configFor(endpoint), bound))).toBe('conflict');
      expect(existsSync(place.stateHome)).toBe(false);
    });

    it(`refuses ${name} (conflict) with an existing registry unchanged`, async () => {
      const place = makePlace('coordination');
      const other = await acquireWorkspace(coordinationFor(place, 'other'), ANY_PORT, 'http://127.0.0.1:40009');
      const coordination = coordinationFor(place, 'endpoint');
      expect(
        await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, configFor(endpoint), bound)),
      ).toBe('conflict');
      expect(inspectWorkspace(coordination)).toEqual({ status: 'absent' });
      other.assert();
    });
  }
});

describe('initializeNew', () => {
  it('is called for a new workspace only, and writeHostConfig publishes host-config.json', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'host-config');
    const calls: NewWorkspace[] = [];
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND, (workspace) => {
      calls.push(workspace);
      expect(workspace.root).toBe(coordination.root);
      workspace.writeHostConfig(policyBytes());
    });
    expect(calls).toHaveLength(1);
    expect(readFileSync(coordination.places.hostConfig)).toEqual(Buffer.from(policyBytes()));
    expect(modeOf(coordination.places.hostConfig)).toBe(0o600);
    lease.assert();
    await lease.release();

    const again = await acquireWorkspace(coordination, ANY_PORT, BOUND, (workspace) => {
      calls.push(workspace);
    });
    expect(calls).toHaveLength(1);
    expect(readFileSync(coordination.places.hostConfig)).toEqual(Buffer.from(policyBytes()));
    again.assert();
  });

  it('may be async, and may publish nothing', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'async');
    let called = 0;
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND, async () => {
      await Promise.resolve();
      called += 1;
    });
    expect(called).toBe(1);
    expect(existsSync(coordination.places.hostConfig)).toBe(false);
    lease.assert();
  });

  it('is not called for a workspace that `initialize` already made', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'initialized');
    await initializeWorkspace(coordination, ANY_PORT);
    let called = 0;
    await acquireWorkspace(coordination, ANY_PORT, BOUND, () => {
      called += 1;
    });
    expect(called).toBe(0);
  });

  it('refuses other bytes in writeHostConfig (refused) and writes nothing', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'wrong-policy');
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND, (workspace) => {
      expect(codeOf(() => workspace.writeHostConfig(policyBytes('another policy')))).toBe('refused');
      expect(codeOf(() => workspace.writeHostConfig(bytesOf('')))).toBe('refused');
      expect(existsSync(coordination.places.hostConfig)).toBe(false);
      workspace.writeHostConfig(policyBytes());
      // Published once: a second call finds the file there.
      expect(codeOf(() => workspace.writeHostConfig(policyBytes()))).toBe('conflict');
    });
    expect(readFileSync(coordination.places.hostConfig)).toEqual(Buffer.from(policyBytes()));
    lease.assert();
  });

  it('refuses writeHostConfig after acquire returned (conflict), writing nothing', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'late');
    let kept: NewWorkspace | undefined;
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND, (workspace) => {
      kept = workspace;
    });
    if (kept === undefined) throw new Error('initializeNew was not called');
    const late = kept;
    const before = stateTreeOf(place.stateHome);
    expect(codeOf(() => late.writeHostConfig(policyBytes()))).toBe('conflict');
    expect(stateTreeOf(place.stateHome)).toEqual(before);
    lease.assert();
  });

  it('is rolled back when it throws after the reservation: no row, no service folder, absent, and acquire works again', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'failing');
    const other = await acquireWorkspace(coordinationFor(place, 'other'), ANY_PORT, 'http://127.0.0.1:40009');
    const thrown = new Error('initializeNew failed');
    let rowDuringInitialisation: string[] = [];
    const caught = await acquireWorkspace(coordination, ANY_PORT, BOUND, (workspace) => {
      // The reservation is published, and the service folder with it, before initializeNew runs.
      rowDuringInitialisation = registryRows(place.stateHome).map((row) => row.root);
      expect(existsSync(coordination.places.format)).toBe(true);
      expect(codeOf(() => workspace.writeHostConfig(policyBytes('another policy')))).toBe('refused');
      throw thrown;
    }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(caught).toBe(thrown);
    expect(rowDuringInitialisation.sort()).toEqual([coordination.root, other.registration.root].sort());
    // Undone in reverse order, the row last: only the other owner's row is left, and no lock.
    expect(registryRows(place.stateHome).map((row) => row.root)).toEqual([other.registration.root]);
    expect(existsSync(coordination.places.service)).toBe(false);
    expect(existsSync(coordination.places.checkoutLock)).toBe(false);
    expect(existsSync(registryPaths(place.stateHome).lock)).toBe(false);
    expect(inspectWorkspace(coordination)).toEqual({ status: 'absent' });
    other.assert();

    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND, (workspace) =>
      workspace.writeHostConfig(policyBytes()),
    );
    expect(readFileSync(coordination.places.hostConfig)).toEqual(Buffer.from(policyBytes()));
    lease.assert();
    await lease.release();
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
  });
});

describe('initialize and configuration', () => {
  it('is idempotent for the same config, and changes nothing the second time', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'initialize');
    await initializeWorkspace(coordination, ANY_PORT);
    expect(workspaceConfiguration(coordination)).toEqual(ANY_PORT);
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: null });
    expect(readFileSync(coordination.places.format, 'utf8')).toBe(
      JSON.stringify({
        configIdentity: readJson(coordination.places.format).configIdentity,
        root: coordination.root,
        schema: 'leasehold.service-format/1',
        stateHome: place.stateHome,
      }),
    );
    expect(await unchangedCodeOf(place.stateHome, () => initializeWorkspace(coordination, ANY_PORT))).toBe('no error');
    expect(await unchangedCodeOf(place.stateHome, () => initializeWorkspace(coordination, { ...ANY_PORT }))).toBe(
      'no error',
    );
  });

  it('refuses another config (conflict), before and after an acquire', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'another-config');
    await initializeWorkspace(coordination, ANY_PORT);
    const other = configFor('http://127.0.0.1:0', 'another policy');
    expect(await unchangedCodeOf(place.stateHome, () => initializeWorkspace(coordination, other))).toBe('conflict');
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, other, BOUND))).toBe('conflict');
    expect(
      await unchangedCodeOf(place.stateHome, () =>
        acquireWorkspace(coordination, configFor('http://127.0.0.1:40001'), BOUND),
      ),
    ).toBe('conflict');
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    await lease.release();
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, other, BOUND))).toBe('conflict');
    expect(await unchangedCodeOf(place.stateHome, () => initializeWorkspace(coordination, other))).toBe('conflict');
    expect(workspaceConfiguration(coordination)).toEqual(ANY_PORT);
  });

  it('refuses an invalid config (refused) before anything is written', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'invalid-config');
    const invalid = { ...ANY_PORT, extra: true } as unknown as typeof ANY_PORT;
    expect(await codeOfAsync(() => initializeWorkspace(coordination, invalid))).toBe('refused');
    expect(await codeOfAsync(() => acquireWorkspace(coordination, invalid, BOUND))).toBe('refused');
    expect(
      await codeOfAsync(() => acquireWorkspace(coordination, { ...ANY_PORT, policyIdentity: 'not a hash' }, BOUND)),
    ).toBe('refused');
    expect(
      await codeOfAsync(() => acquireWorkspace(coordination, { ...ANY_PORT, endpoint: 'http://localhost:0' }, BOUND)),
    ).toBe('refused');
    expect(existsSync(place.stateHome)).toBe(false);
  });

  it('refuses a state home with group or other permission bits that holds anything (refused, with its chmod remedy), writing nothing', async () => {
    const place = makePlace('coordination');
    mkdirSync(place.stateHome, { mode: 0o700 });
    writeFileSync(join(place.stateHome, 'notes.txt'), 'x', { mode: 0o600 });
    chmodSync(place.stateHome, 0o755);
    const coordination = coordinationFor(place, 'open-state-home');
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, BOUND))).toBe(
      'refused',
    );
    expect(await unchangedCodeOf(place.stateHome, () => initializeWorkspace(coordination, ANY_PORT))).toBe('refused');
    expect(inspectWorkspace(coordination)).toEqual({
      status: 'unavailable',
      reason: `refused: ${place.stateHome}: folder has group or other permission bits`,
    });
    await expect(acquireWorkspace(coordination, ANY_PORT, BOUND)).rejects.toMatchObject({
      code: 'refused',
      path: place.stateHome,
      remedy: `take the group and other bits away: \`chmod 700 ${place.stateHome}\``,
    });
  });

  it('takes an empty state home made with mkdir (0755) as new: absent to inspect, then made 0700 by the first acquire', async () => {
    const place = makePlace('coordination');
    mkdirSync(place.stateHome);
    chmodSync(place.stateHome, 0o755);
    const coordination = coordinationFor(place, 'mkdir-state-home');
    expect(inspectWorkspace(coordination)).toEqual({ status: 'absent' });
    expect(modeOf(place.stateHome)).toBe(0o755);
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    expect(modeOf(place.stateHome)).toBe(0o700);
    await lease.release();
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped' });
  });

  it('shares one config among coordinations of one workspace', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'shared');
    const first = openWorkspace(root, { stateHome: place.stateHome });
    const second = openWorkspace(root, { stateHome: place.stateHome });
    await acquireWorkspace(first, ANY_PORT, BOUND);
    expect(workspaceConfiguration(second)).toEqual(ANY_PORT);
    expect(inspectWorkspace(second)).toEqual(inspectWorkspace(first));
  });
});
