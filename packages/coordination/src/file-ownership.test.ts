import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { currentProcess } from '@leasehold/private-files';
import {
  cleanUp,
  codeOf,
  codeOfAsync,
  handPlaces,
  killUnreaped,
  makePlace,
  replaceFile,
  sharedFixturePath,
  spawnUnreaped,
} from '@leasehold/test-utils';
import {
  ANY_PORT,
  BOUND,
  FIXTURE_MODULES,
  ambiguousHolders,
  goneHolder,
  makeWorkspace,
  policyBytes,
  reservationFor,
  writeRows,
} from '../test/functional-helpers.js';
import { ContractError, fileOwnership, type Backend, type OwnershipLease } from './index.js';

afterEach(cleanUp);

const CAPABILITY = /^[A-Za-z0-9_-]{43}$/;

/** Resolves with the first error the lease's watch reports. */
function lostOf(lease: OwnershipLease): Promise<unknown> {
  return new Promise((resolve) => {
    lease.watch(10, resolve);
  });
}

describe('fileOwnership', () => {
  it('names its state home and the file backend', () => {
    const place = makePlace('coordination');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    expect(ownership.stateHome).toBe(place.stateHome);
    expect(ownership.backend).toEqual({ kind: 'files' });
  });

  it("names its owner's process as list and recovery judge it: live, then absent once it is a zombie (killed, never reaped)", async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'zombie');
    const plan = {
      workspace: root,
      stateHome: place.stateHome,
      operation: 'acquire',
      config: ANY_PORT,
      endpoint: BOUND,
      killAt: 'hold',
      modules: FIXTURE_MODULES,
    };
    const { parent, pid } = await spawnUnreaped(process.execPath, [sharedFixturePath('crasher'), JSON.stringify(plan)]);
    await parent.line((line) => line.includes('"held"'));
    const ownership = fileOwnership({ stateHome: place.stateHome });
    expect(await ownership.inspect(root)).toMatchObject({ status: 'unavailable', owner: { pid, process: 'live' } });
    await killUnreaped(pid);
    // kill(pid, 0) still finds a zombie; its start time, and what it holds, are gone.
    expect(process.kill(pid, 0)).toBe(true);
    expect(await ownership.inspect(root)).toMatchObject({ status: 'unavailable', owner: { pid, process: 'absent' } });
    expect((await ownership.list()).map(({ pid: listed, verdict }) => ({ listed, verdict }))).toEqual([
      { listed: pid, verdict: 'absent' },
    ]);
  });

  it('acquires, is seen by inspect, writes its phase and releases to stopped', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'life');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    expect(await ownership.inspect(root)).toEqual({ status: 'absent' });
    expect(await ownership.configuration(root)).toBeUndefined();

    const lease = await ownership.acquire(root, ANY_PORT, {
      boundEndpoint: BOUND,
      initializeNew: (fresh) => fresh.writeHostConfig(policyBytes()),
    });
    const owner = {
      epoch: lease.owner.epoch,
      endpoint: BOUND,
      pid: process.pid,
      host: currentProcess().host,
      process: 'live',
    };
    expect(lease.root).toBe(root);
    expect(lease.owner).toEqual({ ...owner, phase: 'idle', version: 1 });
    await lease.assert();
    // Files alone never prove an idle owner serving: the transport does.
    expect(await ownership.inspect(root)).toMatchObject({ status: 'unavailable', owner: { ...owner, phase: 'idle' } });
    expect(await ownership.configuration(root)).toEqual(ANY_PORT);

    await lease.phase('stopping');
    expect(lease.owner.phase).toBe('stopping');
    expect(await ownership.inspect(root)).toEqual({
      status: 'stopping',
      owner: { ...owner, phase: 'stopping', version: 2 },
    });

    await lease.release();
    expect(await ownership.inspect(root)).toEqual({ status: 'stopped', epoch: owner.epoch, version: 3 });
    expect(await codeOfAsync(() => lease.assert())).toBe('unavailable');
    expect(await codeOfAsync(() => lease.phase('idle'))).toBe('unavailable');
    await ownership.close();
  });

  it('refuses a second acquire of the root, an overlapping root and the same endpoint while one is held', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'held');
    const first = fileOwnership({ stateHome: place.stateHome });
    const second = fileOwnership({ stateHome: place.stateHome });
    const lease = await first.acquire(root, ANY_PORT, { boundEndpoint: BOUND });
    expect(await codeOfAsync(() => second.acquire(root, ANY_PORT, { boundEndpoint: 'http://127.0.0.1:40002' }))).toBe(
      'conflict',
    );
    expect(
      await codeOfAsync(() =>
        second.acquire(makeWorkspace(place, 'held/inner'), ANY_PORT, { boundEndpoint: 'http://127.0.0.1:40003' }),
      ),
    ).toBe('conflict');
    expect(
      await codeOfAsync(() => second.acquire(makeWorkspace(place, 'other'), ANY_PORT, { boundEndpoint: BOUND })),
    ).toBe('conflict');
    await lease.assert();
    await lease.release();
    const again = await second.acquire(root, ANY_PORT, { boundEndpoint: 'http://127.0.0.1:40002' });
    expect(again.owner.epoch).not.toBe(lease.owner.epoch);
    await again.release();
  });

  it('rejects, never throws, for a root that is not absolute: inspect answers unavailable', async () => {
    const place = makePlace('coordination');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    expect(await ownership.inspect('relative/root')).toMatchObject({
      status: 'unavailable',
      reason: expect.stringMatching(/^refused: /) as unknown,
    });
    const acquiring = ownership.acquire('relative/root', ANY_PORT, { boundEndpoint: BOUND });
    expect(await codeOfAsync(acquiring)).toBe('refused');
  });

  it('reports through watch a file changed under the owner, and the lease no longer asserts', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'watched');
    const lease = await fileOwnership({ stateHome: place.stateHome }).acquire(root, ANY_PORT, { boundEndpoint: BOUND });
    const lost = lostOf(lease);
    // The same bytes in a new file: only its stamp changes, and that is enough.
    const { registration } = handPlaces(place.stateHome, root);
    replaceFile(place.base, registration, readFileSync(registration));
    const error = await lost;
    expect(ContractError.is(error, 'conflict')).toBe(true);
    expect(await codeOfAsync(() => lease.assert())).toBe('conflict');
    expect(await codeOfAsync(() => lease.release())).toBe('conflict');
  });

  it('lists every row of the table with whether its holder is live, absent or cannot be told', async () => {
    const place = makePlace('coordination');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    expect(await ownership.list()).toEqual([]);
    const gone = {
      ...reservationFor(place.stateHome, makeWorkspace(place, 'gone'), 'http://127.0.0.1:40011'),
      ...goneHolder(),
    };
    const elsewhere = ambiguousHolders().find(({ name }) => name === 'another host')?.holder;
    const far = {
      ...reservationFor(place.stateHome, makeWorkspace(place, 'far'), 'http://127.0.0.1:40012'),
      ...elsewhere,
    };
    await writeRows(place, [gone, far]);
    const live = await ownership.acquire(makeWorkspace(place, 'live'), ANY_PORT, { boundEndpoint: BOUND });
    const rows = await ownership.list();
    const summary = rows.map(({ root, endpoint, epoch, verdict }) => ({ root, endpoint, epoch, verdict }));
    expect(summary.sort((a, b) => a.root.localeCompare(b.root))).toEqual([
      { root: far.root, endpoint: far.endpoint, epoch: far.epoch, verdict: 'ambiguous' },
      { root: gone.root, endpoint: gone.endpoint, epoch: gone.epoch, verdict: 'absent' },
      { root: live.root, endpoint: BOUND, epoch: live.owner.epoch, verdict: 'live' },
    ]);
    expect(rows.find((row) => row.root === live.root)).toMatchObject({ pid: process.pid, host: currentProcess().host });
    await live.release();
  });

  it('gives local access to a held workspace only, the same the lease holds', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'access');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    expect(await codeOfAsync(() => ownership.localAccess(root))).toBe('unavailable');
    const lease = await ownership.acquire(root, ANY_PORT, { boundEndpoint: BOUND });
    const access = await ownership.localAccess(root);
    expect(access).toEqual(lease.localAccess());
    expect(access).toMatchObject({
      endpoint: BOUND,
      epoch: lease.owner.epoch,
      capability: expect.stringMatching(CAPABILITY) as unknown,
    });
    await lease.release();
    expect(await codeOfAsync(() => ownership.localAccess(root))).toBe('unavailable');
    expect(codeOf(() => lease.localAccess())).toBe('unavailable');
  });

  it('names the file its local access reads the capability from, without reading it', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'capability');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    const file = ownership.capabilityFile(root);
    expect(file).toBe(handPlaces(place.stateHome, root).capability);
    const lease = await ownership.acquire(root, ANY_PORT, { boundEndpoint: BOUND });
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({
      capability: (await ownership.localAccess(root)).capability,
    });
    await lease.release();
    expect(codeOf(() => ownership.capabilityFile('relative/root'))).toBe('refused');
  });

  it('initializes a workspace once, idempotent for the same config, conflict for another', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'init');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    await ownership.initialize(root, ANY_PORT);
    await ownership.initialize(root, ANY_PORT);
    expect(await ownership.configuration(root)).toEqual(ANY_PORT);
    expect(await ownership.inspect(root)).toMatchObject({ status: 'stopped', epoch: null });
    expect(await codeOfAsync(() => ownership.initialize(root, { ...ANY_PORT, endpoint: BOUND }))).toBe('conflict');
  });

  it('forwards its backend: a state home first used with another backend refuses this one, and the other way round', async () => {
    const place = makePlace('coordination');
    const etcd: Backend = { kind: 'etcd', endpoints: ['http://127.0.0.1:2379'], prefix: '/leasehold/files-test' };
    const local = fileOwnership({ stateHome: place.stateHome, backend: etcd });
    expect(local.backend).toEqual(etcd);
    const lease = await local.acquire(makeWorkspace(place, 'first'), ANY_PORT, { boundEndpoint: BOUND });
    const files = fileOwnership({ stateHome: place.stateHome });
    expect(
      await codeOfAsync(() =>
        files.acquire(makeWorkspace(place, 'second'), ANY_PORT, { boundEndpoint: 'http://127.0.0.1:40002' }),
      ),
    ).toBe('refused');
    await lease.release();
  });
});
