import { randomUUID } from 'node:crypto';
import { chmodSync, cpSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { ContractError, encode, type Reservation, type WorkspacePlaces } from '@leasehold/contracts';
import { currentProcess } from '@leasehold/private-files';
import { afterEach, describe, expect, it } from 'vitest';
import {
  bytesOf,
  cleanUp,
  codeOf,
  codeOfAsync,
  makePlace,
  replaceFile,
  rewriteJson,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  ANY_PORT,
  BOUND,
  ambiguousHolders,
  coordinationFor,
  goneHolder,
  policyBytes,
  readJson,
  registryLockBytes,
  registryPaths,
  stateTreeOf,
} from '../test/functional-helpers.js';
import {
  acquireWorkspace,
  inspectWorkspace,
  workspaceConfiguration,
  workspaceLocalAccess,
  type FileLease,
  type Workspace,
} from './index.js';

afterEach(cleanUp);

const INTERVAL_MS = 10;

interface Owned {
  readonly place: TestPlace;
  readonly coordination: Workspace;
  readonly places: WorkspacePlaces;
  readonly lease: FileLease;
}

async function owned(): Promise<Owned> {
  const place = makePlace('coordination');
  const coordination = coordinationFor(place, 'owned');
  const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND, (workspace) =>
    workspace.writeHostConfig(policyBytes()),
  );
  return { place, coordination, places: coordination.places, lease };
}

/** Starts watching; `lost` resolves with the first onLost error, `calls` counts every call. */
function watchOf(lease: FileLease): { calls: unknown[]; lost: Promise<unknown>; stop: () => void } {
  const calls: unknown[] = [];
  let resolveLost: (error: unknown) => void = () => {};
  const lost = new Promise<unknown>((resolve) => {
    resolveLost = resolve;
  });
  const stop = lease.watch(INTERVAL_MS, (error) => {
    calls.push(error);
    resolveLost(error);
  });
  return { calls, lost, stop };
}

/** Replaces a file by a new one holding the same bytes: only its stamp changes. */
function sameBytesAgain(place: TestPlace, path: string): void {
  replaceFile(place.base, path, readFileSync(path));
}

const changes: readonly { name: string; code: string; change: (owner: Owned) => void }[] = [
  {
    name: 'registration.json rewritten with the same bytes (a stamp-only change)',
    code: 'conflict',
    change: ({ place, places }) => sameBytesAgain(place, places.registration),
  },
  {
    name: 'owner.lock replaced',
    code: 'conflict',
    change: ({ place, places }) => sameBytesAgain(place, places.ownerLock),
  },
  {
    name: 'the capability replaced',
    code: 'conflict',
    change: ({ place, places }) => sameBytesAgain(place, places.capability),
  },
  {
    name: 'the checkout lock replaced',
    code: 'conflict',
    change: ({ place, places }) => sameBytesAgain(place, places.checkoutLock),
  },
  {
    name: 'format.json replaced',
    code: 'conflict',
    change: ({ place, places }) => sameBytesAgain(place, places.format),
  },
  {
    name: 'host-config.json replaced',
    code: 'conflict',
    change: ({ place, places }) => sameBytesAgain(place, places.hostConfig),
  },
  {
    name: 'config.json changed',
    code: 'conflict',
    change: ({ place, places }) =>
      rewriteJson(places.config, (value) => ({ ...value, endpoint: BOUND }), { scratch: place.base }),
  },
  {
    name: 'the capability removed',
    code: 'conflict',
    change: ({ places }) => rmSync(places.capability),
  },
  {
    name: 'an extra file appearing in the service folder',
    code: 'refused',
    change: ({ place, places }) => replaceFile(place.base, join(places.service, 'stray.json'), bytesOf('{}')),
  },
  {
    name: 'its registry row changed',
    code: 'conflict',
    change: ({ place }) =>
      rewriteJson(
        registryPaths(place.stateHome).roots,
        (value) => ({
          ...value,
          entries: (value.entries as Reservation[]).map((entry) => ({ ...entry, ownerToken: randomUUID() })),
        }),
        { scratch: place.base },
      ),
  },
  {
    name: 'its registry row removed',
    code: 'conflict',
    change: ({ place }) =>
      replaceFile(
        place.base,
        registryPaths(place.stateHome).roots,
        encode({ schema: 'leasehold.registry/1', entries: [] }),
      ),
  },
];

describe('watch: the self-fence', () => {
  for (const { name, code, change } of changes) {
    it(`calls onLost exactly once (${code}) for ${name}; the lease then touches nothing`, async () => {
      const owner = await owned();
      const { lease, place } = owner;
      const { calls, lost } = watchOf(lease);
      lease.assert();
      change(owner);
      const error = await lost;
      expect(ContractError.is(error, code as ContractError['code'])).toBe(true);
      expect(calls).toEqual([error]);
      // Lost for good: every later call answers the same, and onLost is not called again.
      for (let attempt = 0; attempt < 5; attempt += 1) expect(codeOf(() => lease.assert())).toBe(code);
      expect(codeOf(() => lease.phase('stopping'))).toBe(code);
      const before = stateTreeOf(place.stateHome);
      expect(await codeOfAsync(() => lease.release())).toBe(code);
      expect(stateTreeOf(place.stateHome)).toEqual(before);
      expect(calls).toHaveLength(1);
    });
  }

  it("is never triggered by other workspaces' acquire and release, nor by roots.json rewritten around its row", async () => {
    const owner = await owned();
    const { lease, place, coordination } = owner;
    const { calls, stop } = watchOf(lease);
    const others = [coordinationFor(place, 'other-1'), coordinationFor(place, 'other-2')];
    for (let round = 0; round < 4; round += 1) {
      for (const [index, other] of others.entries()) {
        const otherLease = await acquireWorkspace(other, ANY_PORT, `http://127.0.0.1:${41000 + index}`);
        lease.assert();
        otherLease.phase('stopping');
        lease.assert();
        await otherLease.release();
        lease.assert();
      }
      // The same rows in a new roots.json: only the row is compared.
      replaceFile(place.base, registryPaths(place.stateHome).roots, readFileSync(registryPaths(place.stateHome).roots));
      lease.assert();
    }
    // A registry lock is no fence, whoever holds it: live, gone or one that cannot be told.
    const holders = [currentProcess(), goneHolder(), ...ambiguousHolders().map(({ holder }) => holder)];
    for (const holder of holders) {
      replaceFile(place.base, registryPaths(place.stateHome).lock, registryLockBytes(holder, others[0]!.root));
      lease.assert();
      expect(lease.localAccess().epoch).toBe(lease.registration.epoch);
      expect(workspaceLocalAccess(coordination).epoch).toBe(lease.registration.epoch);
    }
    rmSync(registryPaths(place.stateHome).lock);
    lease.phase('stopping');
    lease.assert();
    stop();
    expect(calls).toEqual([]);
    expect(readJson(registryPaths(place.stateHome).roots).entries).toHaveLength(1);
    await lease.release();
    expect(calls).toEqual([]);
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
  });

  it('stops watching on release, and a released lease is never reported lost', async () => {
    const owner = await owned();
    const { lease, coordination } = owner;
    const { calls } = watchOf(lease);
    await lease.release();
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
    for (let attempt = 0; attempt < 5; attempt += 1) expect(codeOf(() => lease.assert())).toBe('unavailable');
    expect(calls).toEqual([]);
  });
});

describe('the state home itself', () => {
  /** A stopped workspace next to the owned one, in the same state home. */
  async function withStopped(owner: Owned): Promise<{ stopped: Workspace; epoch: string }> {
    const stopped = coordinationFor(owner.place, 'stopped');
    const lease = await acquireWorkspace(stopped, ANY_PORT, 'http://127.0.0.1:40002');
    await lease.release();
    expect(inspectWorkspace(stopped)).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
    return { stopped, epoch: lease.registration.epoch };
  }

  /** What an unsafe state home must give: unavailable reads, a refused lease, onLost once. */
  async function expectFencedOut(
    owner: Owned,
    stopped: Workspace,
    watch: ReturnType<typeof watchOf>,
    problem: string,
  ): Promise<void> {
    const { coordination, lease, place } = owner;
    for (const reader of [stopped, coordination]) {
      const inspection = inspectWorkspace(reader);
      expect(inspection).toMatchObject({ status: 'unavailable' });
      if (inspection.status !== 'unavailable') throw new Error('unreachable');
      expect(inspection.reason).toBe(`refused: ${place.stateHome}: ${problem}`);
      expect(codeOf(() => workspaceLocalAccess(reader))).toBe('unavailable');
      expect(codeOf(() => workspaceConfiguration(reader))).toBe('refused');
    }
    const error = await watch.lost;
    expect(ContractError.is(error, 'refused')).toBe(true);
    expect(watch.calls).toEqual([error]);
    expect(codeOf(() => lease.assert())).toBe('refused');
    expect(codeOf(() => lease.localAccess())).toBe('refused');
    expect(codeOf(() => lease.phase('stopping'))).toBe('refused');
    expect(await codeOfAsync(() => lease.release())).toBe('refused');
    expect(watch.calls).toHaveLength(1);
  }

  it('with mode 0755: inspect unavailable (not stopped), localAccess unavailable, the lease refused and lost', async () => {
    const owner = await owned();
    const { stopped, epoch } = await withStopped(owner);
    const watch = watchOf(owner.lease);
    owner.lease.assert();
    chmodSync(owner.place.stateHome, 0o755);
    const before = stateTreeOf(owner.place.stateHome);
    await expectFencedOut(owner, stopped, watch, 'folder has group or other permission bits');
    expect(stateTreeOf(owner.place.stateHome)).toEqual(before);
    // Safe again: the reads answer as before; the lost lease stays lost and touches nothing.
    chmodSync(owner.place.stateHome, 0o700);
    expect(inspectWorkspace(stopped)).toMatchObject({ status: 'stopped', epoch });
    expect(workspaceLocalAccess(owner.coordination).epoch).toBe(owner.lease.registration.epoch);
    expect(codeOf(() => owner.lease.assert())).toBe('refused');
  });

  for (const target of ['a copy of it', 'the same folder, moved aside'] as const) {
    it(`replaced by a symbolic link to ${target} under a live owner: localAccess unavailable, the lease refused and lost`, async () => {
      const owner = await owned();
      const { stopped } = await withStopped(owner);
      const watch = watchOf(owner.lease);
      owner.lease.assert();
      const { stateHome } = owner.place;
      const elsewhere = join(owner.place.base, 'state-elsewhere');
      if (target === 'a copy of it') {
        cpSync(stateHome, elsewhere, { recursive: true });
        rmSync(stateHome, { recursive: true });
      } else {
        // The very same inodes: only the link differs.
        renameSync(stateHome, elsewhere);
      }
      symlinkSync(elsewhere, stateHome);
      await expectFencedOut(owner, stopped, watch, 'folder is a symbolic link');
    });
  }
});
