import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { encode, REGISTRY_ENTRIES, type ContractError, type Reservation } from '@leasehold/contracts';
import { currentProcess } from '@leasehold/private-files';
import { Registry } from '@leasehold/registry';
import { afterEach, describe, expect, it } from 'vitest';
import {
  bytesOf,
  cleanUp,
  codeOf,
  codeOfAsync,
  makePlace,
  namesIn,
  replaceFile,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  ANY_PORT,
  BOUND,
  ambiguousHolders,
  configFor,
  coordinationFor,
  goneHolder,
  makeWorkspace,
  registryLockBytes,
  registryPaths,
  registryRows,
  reservationFor,
  stateTreeOf,
  unchangedCodeOf,
  writeRows,
} from '../test/functional-helpers.js';
import {
  Checkout,
  acquireWorkspace,
  initializeWorkspace,
  inspectWorkspace,
  openWorkspace,
  workspaceLocalAccess,
  type FileLease,
  type Workspace,
} from './index.js';

afterEach(cleanUp);

function coordinationAt(place: TestPlace, root: string): Workspace {
  return openWorkspace(root, { stateHome: place.stateHome });
}

describe('overlapping roots', () => {
  it('refuses a root nested in a held one (conflict); the registry holds one row', async () => {
    const place = makePlace('coordination');
    const outer = coordinationFor(place, 'a');
    const inner = coordinationFor(place, 'a/b');
    const lease = await acquireWorkspace(outer, ANY_PORT, BOUND);
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(inner, ANY_PORT, 'http://127.0.0.1:40002')),
    ).toBe('conflict');
    expect(registryRows(place.stateHome).map((row) => row.root)).toEqual([outer.root]);
    expect(inspectWorkspace(inner)).toEqual({ status: 'absent' });
    lease.assert();
  });

  it('refuses a root that holds a held one (conflict); the registry holds one row', async () => {
    const place = makePlace('coordination');
    const inner = coordinationFor(place, 'a/b');
    const outer = coordinationFor(place, 'a');
    const lease = await acquireWorkspace(inner, ANY_PORT, BOUND);
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(outer, ANY_PORT, 'http://127.0.0.1:40002')),
    ).toBe('conflict');
    expect(registryRows(place.stateHome).map((row) => row.root)).toEqual([inner.root]);
    lease.assert();
  });

  it('refuses an equal root from a second coordination (conflict); the registry holds one row', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'same');
    const first = coordinationAt(place, root);
    const second = coordinationAt(place, root);
    const lease = await acquireWorkspace(first, ANY_PORT, BOUND);
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(second, ANY_PORT, 'http://127.0.0.1:40002')),
    ).toBe('conflict');
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(first, ANY_PORT, 'http://127.0.0.1:40002')),
    ).toBe('conflict');
    expect(registryRows(place.stateHome)).toHaveLength(1);
    lease.assert();
  });

  it('lets /a/b and /a/bc both acquire, and both release', async () => {
    const place = makePlace('coordination');
    const ab = coordinationFor(place, 'a/b');
    const abc = coordinationFor(place, 'a/bc');
    const first = await acquireWorkspace(ab, ANY_PORT, BOUND);
    const second = await acquireWorkspace(abc, ANY_PORT, 'http://127.0.0.1:40002');
    expect(registryRows(place.stateHome).map((row) => row.root)).toEqual([ab.root, abc.root]);
    first.assert();
    second.assert();
    await first.release();
    second.assert();
    await second.release();
    expect(registryRows(place.stateHome)).toEqual([]);
  });
});

describe('endpoints', () => {
  it('refuses the same endpoint for a disjoint root (conflict)', async () => {
    const place = makePlace('coordination');
    const first = coordinationFor(place, 'one');
    const second = coordinationFor(place, 'two');
    await acquireWorkspace(first, ANY_PORT, BOUND);
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(second, ANY_PORT, BOUND))).toBe('conflict');
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(second, configFor(BOUND)))).toBe('conflict');
    expect(inspectWorkspace(second)).toEqual({ status: 'absent' });
    // Another port is fine.
    const lease = await acquireWorkspace(second, ANY_PORT, 'http://127.0.0.1:40002');
    lease.assert();
  });

  it('frees the endpoint on release', async () => {
    const place = makePlace('coordination');
    const first = coordinationFor(place, 'one');
    const second = coordinationFor(place, 'two');
    const lease = await acquireWorkspace(first, ANY_PORT, BOUND);
    await lease.release();
    (await acquireWorkspace(second, ANY_PORT, BOUND)).assert();
  });
});

describe('a full registry', () => {
  async function fill(place: TestPlace): Promise<Reservation[]> {
    const list = Array.from({ length: REGISTRY_ENTRIES }, (_, index) =>
      reservationFor(place.stateHome, join(place.base, 'full', `r${index}`), `http://127.0.0.1:${20000 + index}`),
    );
    await writeRows(place, list);
    return list;
  }

  it(`refuses a ${REGISTRY_ENTRIES + 1}th reservation (capacity), with nothing written`, async () => {
    const place = makePlace('coordination');
    const list = await fill(place);
    expect(registryRows(place.stateHome)).toHaveLength(REGISTRY_ENTRIES);
    const coordination = coordinationFor(place, 'one-too-many');
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, BOUND))).toBe(
      'capacity',
    );
    expect(inspectWorkspace(coordination)).toEqual({ status: 'absent' });
    expect(registryRows(place.stateHome)).toEqual(list);
  });

  it('answers an overlapping root or a shared endpoint (conflict) before capacity', async () => {
    const place = makePlace('coordination');
    await fill(place);
    const nested = coordinationFor(place, 'unused');
    const inside = coordinationAt(place, join(place.base, 'full', 'r7', 'inside'));
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(inside, ANY_PORT, BOUND))).toBe('conflict');
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(nested, ANY_PORT, 'http://127.0.0.1:20005')),
    ).toBe('conflict');
  });

  it('admits a new owner again once one reservation is gone', async () => {
    const place = makePlace('coordination');
    const list = await fill(place);
    await writeRows(place, list.slice(1));
    const lease = await acquireWorkspace(coordinationFor(place, 'room'), ANY_PORT, BOUND);
    expect(registryRows(place.stateHome)).toHaveLength(REGISTRY_ENTRIES);
    await lease.release();
    expect(registryRows(place.stateHome)).toHaveLength(REGISTRY_ENTRIES - 1);
  });
});

describe('a corrupt roots.json', () => {
  const valid = (place: TestPlace): Reservation =>
    reservationFor(place.stateHome, join(place.base, 'elsewhere'), 'http://127.0.0.1:40009');
  const rootsOf = (entries: readonly unknown[]): Uint8Array => encode({ schema: 'leasehold.registry/1', entries });

  const corruptions: readonly { name: string; bytes: (place: TestPlace) => Uint8Array }[] = [
    { name: 'not JSON', bytes: () => bytesOf('{"entries":[') },
    {
      name: 'a duplicate key',
      bytes: (place) =>
        bytesOf(
          `{"entries":[],${Buffer.from(rootsOf([valid(place)]))
            .toString('utf8')
            .slice(1)}`,
        ),
    },
    {
      name: 'a duplicate key inside an entry',
      bytes: (place) => {
        const text = Buffer.from(rootsOf([valid(place)])).toString('utf8');
        return bytesOf(text.replace('{"configIdentity"', '{"pid":1,"configIdentity"'));
      },
    },
    {
      name: 'an unknown key',
      bytes: (place) => encode({ schema: 'leasehold.registry/1', entries: [valid(place)], extra: true }),
    },
    { name: 'an unknown key in an entry', bytes: (place) => rootsOf([{ ...valid(place), extra: true }]) },
    {
      name: 'an entry of another state home',
      bytes: (place) => rootsOf([{ ...valid(place), stateHome: join(place.base, 'other-state') }]),
    },
    { name: 'a relative root', bytes: (place) => rootsOf([{ ...valid(place), root: 'relative/root' }]) },
    {
      name: 'an unnormalised root',
      bytes: (place) => rootsOf([{ ...valid(place), root: `${place.base}/a/../elsewhere` }]),
    },
    {
      name: 'a root with a trailing slash',
      bytes: (place) => rootsOf([{ ...valid(place), root: `${place.base}/elsewhere/` }]),
    },
    {
      name: 'two entries with overlapping roots',
      bytes: (place) =>
        rootsOf([
          valid(place),
          { ...valid(place), root: join(place.base, 'elsewhere', 'inner'), endpoint: 'http://127.0.0.1:40010' },
        ]),
    },
    {
      name: 'two entries sharing an endpoint',
      bytes: (place) => rootsOf([valid(place), { ...valid(place), root: join(place.base, 'disjoint') }]),
    },
  ];

  for (const { name, bytes } of corruptions) {
    it(`with ${name}: inspect unavailable, acquire refused, no lock left, roots.json unchanged`, async () => {
      const place = makePlace('coordination');
      const coordination = coordinationFor(place, 'workspace');
      await (await acquireWorkspace(coordination, ANY_PORT, BOUND)).release();
      const paths = registryPaths(place.stateHome);
      replaceFile(place.base, paths.roots, bytes(place));
      const rootsBefore = readFileSync(paths.roots);

      const inspection = inspectWorkspace(coordination);
      expect(inspection.status).toBe('unavailable');
      if (inspection.status !== 'unavailable') throw new Error('unreachable');
      expect(inspection.reason.startsWith(`refused: ${paths.roots}: `)).toBe(true);
      expect(codeOf(() => workspaceLocalAccess(coordination))).toBe('unavailable');

      const before = stateTreeOf(place.stateHome);
      expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, BOUND))).toBe(
        'refused',
      );
      expect(await unchangedCodeOf(place.stateHome, () => initializeWorkspace(coordination, ANY_PORT))).toBe('refused');
      const checkout = new Checkout(coordination.root, { stateHome: place.stateHome });
      expect(await unchangedCodeOf(place.stateHome, () => checkout.acquire())).toBe('refused');
      const other = coordinationFor(place, 'another');
      expect(
        await unchangedCodeOf(place.stateHome, () => acquireWorkspace(other, ANY_PORT, 'http://127.0.0.1:40002')),
      ).toBe('refused');
      expect(existsSync(paths.lock)).toBe(false);
      expect(readFileSync(paths.roots)).toEqual(rootsBefore);
      expect(stateTreeOf(place.stateHome)).toEqual(before);
    });
  }
});

describe('a registered workspace whose folder was deleted', () => {
  it('still fences its root, its owner counts the lease lost with its mark, and the rest of the registry stays usable', async () => {
    const place = makePlace('coordination');
    const gone = coordinationFor(place, 'gone');
    const lease = await acquireWorkspace(gone, ANY_PORT, BOUND);
    rmSync(gone.root, { recursive: true });
    expect(existsSync(gone.root)).toBe(false);
    // The folder's own mark went with it: an owner whose fence changed under it has lost its lease.
    expect(codeOf(() => lease.assert())).toBe('conflict');

    const again = coordinationAt(place, gone.root);
    const inspection = inspectWorkspace(again);
    expect(inspection).toMatchObject({ status: 'unavailable', owner: { epoch: lease.registration.epoch } });
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(again, ANY_PORT, 'http://127.0.0.1:40002')),
    ).toBe('conflict');
    const nested = coordinationAt(place, join(gone.root, 'inner'));
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(nested, ANY_PORT, 'http://127.0.0.1:40002')),
    ).toBe('conflict');
    expect(registryRows(place.stateHome).map((row) => row.root)).toEqual([gone.root]);

    const disjoint = coordinationFor(place, 'disjoint');
    for (let round = 0; round < 2; round += 1) {
      const other = await acquireWorkspace(disjoint, ANY_PORT, 'http://127.0.0.1:40003');
      other.assert();
      await other.release();
      expect(inspectWorkspace(disjoint)).toMatchObject({ status: 'stopped', epoch: other.registration.epoch });
    }
    expect(registryRows(place.stateHome).map((row) => row.root)).toEqual([gone.root]);
    expect(inspectWorkspace(again)).toEqual(inspection);
  });
});

describe('rows and locks the service state does not explain', () => {
  it('a row without service state: inspect unavailable, acquire conflict, initialize quarantine', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'row-only');
    const row = reservationFor(place.stateHome, coordination.root, BOUND);
    await new Registry(place.stateHome).transaction(coordination.root, (transaction) => transaction.reserve(row));
    // The row names this process, which is live: a passing state of its acquire, for all inspect can tell.
    expect(inspectWorkspace(coordination)).toEqual({
      status: 'unavailable',
      reason: 'a registry row has no service state',
      inProgress: true,
    });
    expect(codeOf(() => workspaceLocalAccess(coordination))).toBe('unavailable');
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, 'http://127.0.0.1:40002')),
    ).toBe('conflict');
    expect(await unchangedCodeOf(place.stateHome, () => initializeWorkspace(coordination, ANY_PORT))).toBe(
      'quarantine',
    );
  });

  it('a row that outlived a stopped registration: inspect unavailable, acquire conflict', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'leftover-row');
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    const rows = registryRows(place.stateHome);
    await lease.release();
    await writeRows(place, rows);
    expect(inspectWorkspace(coordination)).toEqual({
      status: 'unavailable',
      reason: 'a registry row outlived its registration',
      inProgress: true,
    });
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, 'http://127.0.0.1:40002')),
    ).toBe('conflict');
  });

  it('a row beside an initialised workspace without registration: inspect unavailable, acquire quarantine (its process is gone)', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'initialised-row');
    await initializeWorkspace(coordination, ANY_PORT);
    const row = { ...reservationFor(place.stateHome, coordination.root, BOUND), ...goneHolder() };
    await new Registry(place.stateHome).transaction(coordination.root, (transaction) => transaction.reserve(row));
    // Its process is gone: no longer in progress, a fence for recovery.
    expect(inspectWorkspace(coordination)).toEqual({
      status: 'unavailable',
      reason: 'a registry row outlived its registration',
    });
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, 'http://127.0.0.1:40002')),
    ).toBe('quarantine');
  });
});

describe('registry locks: a short hold of the table, never a fence', () => {
  /** Places `registry.lock` by hand, as a holder that has it for a transaction of `root`. */
  function placeLock(place: TestPlace, holder: Parameters<typeof registryLockBytes>[0], root: string): void {
    replaceFile(place.base, registryPaths(place.stateHome).lock, registryLockBytes(holder, root));
  }

  it("a live holder's lock (another workspace's transaction in progress): inspect and localAccess unaffected; writers busy after the bound", async () => {
    const place = makePlace('coordination');
    const stopped = coordinationFor(place, 'stopped');
    const stoppedEpoch = await acquireWorkspace(stopped, ANY_PORT, 'http://127.0.0.1:40003').then(async (lease) => {
      await lease.release();
      return lease.registration.epoch;
    });
    const coordination = openWorkspace(makeWorkspace(place, 'held'), { stateHome: place.stateHome, lockWaitMs: 20 });
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    const held = inspectWorkspace(coordination);
    placeLock(place, currentProcess(), makeWorkspace(place, 'busy-elsewhere'));

    // Readers never look at the lock.
    expect(inspectWorkspace(coordination)).toEqual(held);
    expect(held).toMatchObject({ status: 'unavailable', owner: { epoch: lease.registration.epoch } });
    expect(inspectWorkspace(stopped)).toMatchObject({ status: 'stopped', epoch: stoppedEpoch });
    expect(workspaceLocalAccess(coordination).epoch).toBe(lease.registration.epoch);
    expect(lease.localAccess().epoch).toBe(lease.registration.epoch);
    lease.assert();
    lease.phase('stopping');
    lease.assert();

    // Writers wait for the live holder, then give up: busy, with nothing written.
    const waiting = openWorkspace(makeWorkspace(place, 'waiting'), { stateHome: place.stateHome, lockWaitMs: 20 });
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(waiting, ANY_PORT, 'http://127.0.0.1:40002')),
    ).toBe('busy');
    expect(
      await unchangedCodeOf(place.stateHome, () =>
        new Checkout(waiting.root, { stateHome: place.stateHome, lockWaitMs: 20 }).acquire(),
      ),
    ).toBe('busy');
    // Release stops at its registry transaction, every other fence already gone; the row and the
    // checkout lock stay, naming this live process: in progress.
    expect(await codeOfAsync(() => lease.release())).toBe('busy');
    expect(existsSync(coordination.places.capability)).toBe(false);
    expect(existsSync(coordination.places.ownerLock)).toBe(false);
    expect(existsSync(coordination.places.checkoutLock)).toBe(true);
    expect(registryRows(place.stateHome).map((row) => row.root)).toEqual([coordination.root]);
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'unavailable', inProgress: true });

    // Once the hold is over, the same release goes on from where it stopped.
    rmSync(registryPaths(place.stateHome).lock);
    await lease.release();
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
    expect(registryRows(place.stateHome)).toEqual([]);
    (await acquireWorkspace(waiting, ANY_PORT, 'http://127.0.0.1:40002')).assert();
  });

  it("a dead holder's lock is taken over at once (no wait) by acquire, release, initialize and the checkout lock", async () => {
    const place = makePlace('coordination');
    const options = { stateHome: place.stateHome, lockWaitMs: 0 };
    const coordination = openWorkspace(makeWorkspace(place, 'taker'), options);
    const lockPath = registryPaths(place.stateHome).lock;
    const registry = new Registry(place.stateHome);
    const takenOver = async (action: () => Promise<unknown>) => {
      const dead = goneHolder();
      placeLock(place, dead, makeWorkspace(place, 'crashed'));
      expect(registry.readLock()).toMatchObject({ verdict: 'absent', lock: { pid: dead.pid } });
      await action();
      expect(existsSync(lockPath)).toBe(false);
      // No take-over marker is left behind, and nothing else is in the registry folder.
      expect(namesIn(registryPaths(place.stateHome).folder)).toEqual(['format.json', 'roots.json']);
    };
    await new Registry(place.stateHome).transaction(place.base, () => undefined);

    await takenOver(() => initializeWorkspace(coordination, ANY_PORT));
    let lease: FileLease | undefined;
    await takenOver(async () => {
      lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    });
    if (lease === undefined) throw new Error('unreachable');
    // A transaction that refuses takes the lock over too, and removes it all the same.
    await takenOver(async () =>
      expect(await codeOfAsync(() => acquireWorkspace(coordination, ANY_PORT, BOUND))).toBe('conflict'),
    );
    lease.assert();
    await takenOver(() => lease!.release());
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
    expect(registryRows(place.stateHome)).toEqual([]);
    const checkout = new Checkout(makeWorkspace(place, 'tool'), options);
    await takenOver(async () => (await checkout.acquire()).release());
  });

  for (const name of ['another host', 'another PID namespace']) {
    it(`a lock of a holder on ${name} cannot be told gone: quarantine on acquire and release, readers unaffected`, async () => {
      const place = makePlace('coordination');
      const ambiguous = ambiguousHolders().find((candidate) => candidate.name === name)!.holder;
      const coordination = coordinationFor(place, 'held');
      const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
      const held = inspectWorkspace(coordination);
      const other = coordinationFor(place, 'other');
      placeLock(place, ambiguous, makeWorkspace(place, 'elsewhere'));

      expect(inspectWorkspace(coordination)).toEqual(held);
      expect(workspaceLocalAccess(coordination).epoch).toBe(lease.registration.epoch);
      lease.assert();
      expect(
        await unchangedCodeOf(place.stateHome, () => acquireWorkspace(other, ANY_PORT, 'http://127.0.0.1:40002')),
      ).toBe('quarantine');
      const error = await acquireWorkspace(other, ANY_PORT, 'http://127.0.0.1:40002').catch(
        (caught: unknown) => caught,
      );
      // The error carries the lock as its path; the message names it and its holder, and no command (the CLI words the remedy).
      expect((error as ContractError).path).toBe(registryPaths(place.stateHome).lock);
      expect(String((error as Error).message)).toContain(registryPaths(place.stateHome).lock);
      expect(String((error as Error).message)).toContain(`pid ${ambiguous.pid} on ${ambiguous.host}`);
      expect(String((error as Error).message)).not.toContain('leasehold doctor');
      expect(await unchangedCodeOf(place.stateHome, () => initializeWorkspace(other, ANY_PORT))).toBe('quarantine');
      expect(
        await unchangedCodeOf(place.stateHome, () =>
          new Checkout(other.root, { stateHome: place.stateHome }).acquire(),
        ),
      ).toBe('quarantine');
      // Release stops at its transaction; after an operator removed the lock it goes on.
      expect(await codeOfAsync(() => lease.release())).toBe('quarantine');
      expect(registryRows(place.stateHome).map((row) => row.root)).toEqual([coordination.root]);
      expect(inspectWorkspace(coordination)).toMatchObject({ status: 'unavailable', inProgress: true });
      rmSync(registryPaths(place.stateHome).lock);
      await lease.release();
      expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
      (await acquireWorkspace(other, ANY_PORT, 'http://127.0.0.1:40002')).assert();
    });
  }
});

describe('a live registration whose row is not its reservation', () => {
  it('inspects unavailable with the owner, gives no local access, and fences the lease', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'row-differs');
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    const [row] = registryRows(place.stateHome);
    if (row === undefined) throw new Error('expected a row');
    await writeRows(place, [{ ...row, endpoint: 'http://127.0.0.1:40002' }]);
    expect(inspectWorkspace(coordination)).toEqual({
      status: 'unavailable',
      reason: 'the registry row is not the registration',
      owner: {
        epoch: lease.registration.epoch,
        endpoint: BOUND,
        pid: process.pid,
        host: lease.registration.host,
        phase: 'idle',
        process: 'live',
        version: 1,
      },
      // The row names this live process: for all the files tell, a passing state.
      inProgress: true,
    });
    expect(codeOf(() => workspaceLocalAccess(coordination))).toBe('unavailable');
    expect(codeOf(() => lease.assert())).toBe('conflict');
    expect(await unchangedCodeOf(place.stateHome, () => lease.release())).toBe('conflict');
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, 'http://127.0.0.1:40003')),
    ).toBe('conflict');
  });
});
