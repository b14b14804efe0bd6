import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ContractError, encode, type Reservation } from '@leasehold/contracts';
import { currentProcess } from '@leasehold/private-files';
import { afterEach, describe, expect, it } from 'vitest';
import { bytesOf, cleanUp, codeOf, codeOfAsync, replaceFile } from '@leasehold/test-utils';
import {
  ANY_PORT,
  BOUND,
  coordinationFor,
  makePlace,
  policyBytes,
  readJson,
  registryPaths,
  rewriteJson,
  stateTreeOf,
  type TestPlace,
} from '../test/functional-helpers.js';
import type { OwnerLease, ServiceCoordination, WorkspacePlaces } from './index.js';

afterEach(cleanUp);

const INTERVAL_MS = 10;

interface Owned {
  readonly place: TestPlace;
  readonly coordination: ServiceCoordination;
  readonly places: WorkspacePlaces;
  readonly lease: OwnerLease;
}

async function owned(): Promise<Owned> {
  const place = makePlace();
  const coordination = coordinationFor(place, 'owned');
  const lease = await coordination.acquire(ANY_PORT, BOUND, (workspace) => workspace.writeHostConfig(policyBytes()));
  return { place, coordination, places: coordination.places, lease };
}

/** Starts watching; `lost` resolves with the first onLost error, `calls` counts every call. */
function watchOf(lease: OwnerLease): { calls: unknown[]; lost: Promise<unknown>; stop: () => void } {
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
  replaceFile(place.tmp, path, readFileSync(path));
}

const changes: readonly { name: string; code: string; change: (owner: Owned) => void }[] = [
  {
    name: 'registration.json rewritten with the same bytes (a stamp-only change)',
    code: 'conflict',
    change: ({ place, places }) => sameBytesAgain(place, places.registration),
  },
  { name: 'owner.lock replaced', code: 'conflict', change: ({ place, places }) => sameBytesAgain(place, places.ownerLock) },
  { name: 'the capability replaced', code: 'conflict', change: ({ place, places }) => sameBytesAgain(place, places.capability) },
  { name: 'the checkout lock replaced', code: 'conflict', change: ({ place, places }) => sameBytesAgain(place, places.checkoutLock) },
  { name: 'format.json replaced', code: 'conflict', change: ({ place, places }) => sameBytesAgain(place, places.format) },
  { name: 'host-config.json replaced', code: 'conflict', change: ({ place, places }) => sameBytesAgain(place, places.hostConfig) },
  {
    name: 'config.json changed',
    code: 'conflict',
    change: ({ place, places }) => rewriteJson(place, places.config, (value) => ({ ...value, endpoint: BOUND })),
  },
  {
    name: 'the capability removed',
    code: 'conflict',
    change: ({ places }) => rmSync(places.capability),
  },
  {
    name: 'an extra file appearing in the service folder',
    code: 'refused',
    change: ({ place, places }) => replaceFile(place.tmp, join(places.service, 'stray.json'), bytesOf('{}')),
  },
  {
    name: 'its registry row changed',
    code: 'conflict',
    change: ({ place }) =>
      rewriteJson(place, registryPaths(place.stateHome).roots, (value) => ({
        ...value,
        entries: (value.entries as Reservation[]).map((entry) => ({ ...entry, ownerToken: randomUUID() })),
      })),
  },
  {
    name: 'its registry row removed',
    code: 'conflict',
    change: ({ place }) => replaceFile(place.tmp, registryPaths(place.stateHome).roots, encode({ schema: 'leasehold.registry/1', entries: [] })),
  },
  {
    name: 'a retained registry.lock appearing',
    code: 'quarantine',
    change: ({ place }) =>
      replaceFile(
        place.tmp,
        registryPaths(place.stateHome).lock,
        encode({ schema: 'leasehold.registry-lock/1', token: randomUUID(), ...currentProcess(), retained: true }),
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
        const otherLease = await other.acquire(ANY_PORT, `http://127.0.0.1:${41000 + index}`);
        lease.assert();
        otherLease.phase('stopping');
        lease.assert();
        await otherLease.release();
        lease.assert();
      }
      // The same rows in a new roots.json: only the row is compared.
      replaceFile(place.tmp, registryPaths(place.stateHome).roots, readFileSync(registryPaths(place.stateHome).roots));
      lease.assert();
    }
    lease.phase('stopping');
    lease.assert();
    stop();
    expect(calls).toEqual([]);
    expect(readJson(registryPaths(place.stateHome).roots).entries).toHaveLength(1);
    await lease.release();
    expect(calls).toEqual([]);
    expect(coordination.inspect()).toEqual({ status: 'stopped', epoch: lease.registration.epoch });
  });

  it('stops watching on release, and a released lease is never reported lost', async () => {
    const owner = await owned();
    const { lease, coordination } = owner;
    const { calls } = watchOf(lease);
    await lease.release();
    expect(coordination.inspect()).toEqual({ status: 'stopped', epoch: lease.registration.epoch });
    for (let attempt = 0; attempt < 5; attempt += 1) expect(codeOf(() => lease.assert())).toBe('unavailable');
    expect(calls).toEqual([]);
  });
});
