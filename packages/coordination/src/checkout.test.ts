import { existsSync, readFileSync } from 'node:fs';
import { recoverRemedy } from '@leasehold/contracts';
import { currentProcess } from '@leasehold/private-files';
import { Registry } from '@leasehold/registry';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  codeOf,
  killAndReap,
  makePlace,
  modeOf,
  replaceFile,
  spawnSharedFixture,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  ANY_PORT,
  BOUND,
  FIXTURE_MODULES,
  coordinationFor,
  reservationFor,
  stateTreeOf,
  unchangedCodeOf,
} from '../test/functional-helpers.js';
import { Checkout, acquireWorkspace, inspectWorkspace, type CheckoutHolder } from './index.js';

afterEach(cleanUp);

function checkoutOf(place: TestPlace, root: string): Checkout {
  return new Checkout(root, { stateHome: place.stateHome });
}

function inspected(checkout: Checkout): CheckoutHolder {
  const found = checkout.inspect();
  if (found === undefined) throw new Error('expected a checkout lock');
  return found;
}

describe('the plain checkout lock', () => {
  it('is taken once: a second acquire is conflict; our own lock reads live; release frees it', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'tool');
    const checkout = checkoutOf(place, coordination.root);
    expect(checkout.inspect()).toBeUndefined();
    const handle = await checkout.acquire();
    const found = inspected(checkout);
    expect(found.verdict).toBe('live');
    expect(found.lock).toEqual({ schema: 'leasehold.checkout-lock/1', token: handle.token, ...currentProcess() });
    expect(modeOf(checkout.places.checkoutLock)).toBe(0o600);
    handle.assertOwner();

    expect(await unchangedCodeOf(place.stateHome, () => checkout.acquire())).toBe('conflict');
    expect(await unchangedCodeOf(place.stateHome, () => checkoutOf(place, coordination.root).acquire())).toBe(
      'conflict',
    );
    // A plain tool's lock is no service: the workspace stays absent.
    expect(inspectWorkspace(coordination)).toEqual({ status: 'absent' });

    handle.release();
    expect(checkout.inspect()).toBeUndefined();
    expect(codeOf(() => handle.assertOwner())).toBe('conflict');
    expect(codeOf(() => handle.release())).toBe('conflict');
    const next = await checkout.acquire();
    expect(next.token).not.toBe(handle.token);
    next.release();
  });

  it('assertOwner answers conflict once the file changed (same bytes, new file), and release touches nothing', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'changed');
    const checkout = checkoutOf(place, coordination.root);
    const handle = await checkout.acquire();
    handle.assertOwner();
    replaceFile(place.base, checkout.places.checkoutLock, readFileSync(checkout.places.checkoutLock));
    expect(codeOf(() => handle.assertOwner())).toBe('conflict');
    const before = stateTreeOf(place.stateHome);
    expect(codeOf(() => handle.release())).toBe('conflict');
    expect(stateTreeOf(place.stateHome)).toEqual(before);
  });

  it('blocks a service acquire (conflict) with nothing written, until it is released', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'blocked-service');
    const handle = await checkoutOf(place, coordination.root).acquire();
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, BOUND))).toBe(
      'conflict',
    );
    expect(existsSync(coordination.places.service)).toBe(false);
    expect(inspectWorkspace(coordination)).toEqual({ status: 'absent' });
    handle.release();
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    lease.assert();
  });

  it('cannot be taken while a service owns the workspace (conflict), and reads as the service holding it', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'service');
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    const checkout = checkoutOf(place, coordination.root);
    expect(await unchangedCodeOf(place.stateHome, () => checkout.acquire())).toBe('conflict');
    const found = inspected(checkout);
    expect(found.verdict).toBe('live');
    expect(found.lock.token).toBe(lease.registration.checkoutToken);
    lease.phase('stopping');
    expect(await unchangedCodeOf(place.stateHome, () => checkout.acquire())).toBe('conflict');
    await lease.release();
    const handle = await checkout.acquire();
    handle.assertOwner();
  });
});

describe('the plain checkout lock and a service row', () => {
  it('is refused (conflict) while a row exists for the root, even with no service state yet; free again once the row is gone', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'reserved');
    const checkout = checkoutOf(place, coordination.root);
    const row = reservationFor(place.stateHome, coordination.root, BOUND);
    const registry = new Registry(place.stateHome);
    // A service's reservation comes first, before its service folder and its checkout lock.
    await registry.transaction(coordination.root, (transaction) => transaction.reserve(row));
    expect(await unchangedCodeOf(place.stateHome, () => checkout.acquire())).toBe('conflict');
    expect(existsSync(checkout.places.checkoutLock)).toBe(false);
    await registry.transaction(coordination.root, (transaction) => transaction.unreserve(row.root, row.epoch));
    const handle = await checkout.acquire();
    handle.assertOwner();
    handle.release();
  });

  it("keeps a dead tool's lock under a row (quarantine): with a row, it is a service's to recover", async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'row-over-tool');
    const checkout = checkoutOf(place, coordination.root);
    const child = spawnSharedFixture(
      'checkout-holder',
      { workspace: coordination.root, stateHome: place.stateHome },
      FIXTURE_MODULES,
    );
    await child.line((line) => line.startsWith('{"held"'));
    await killAndReap(child);
    const dead = inspected(checkout);
    expect(dead.verdict).toBe('absent');
    const row = reservationFor(place.stateHome, coordination.root, BOUND);
    await new Registry(place.stateHome).transaction(coordination.root, (transaction) => transaction.reserve(row));
    expect(await unchangedCodeOf(place.stateHome, () => checkout.breakIfAbsent(dead.snapshot))).toBe('quarantine');
  });
});

describe('breakIfAbsent', () => {
  it("refuses a live holder (conflict) and a stale snapshot (conflict), then removes a dead tool's lock", async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'dead-tool');
    const checkout = checkoutOf(place, coordination.root);
    const child = spawnSharedFixture(
      'checkout-holder',
      { workspace: coordination.root, stateHome: place.stateHome },
      FIXTURE_MODULES,
    );
    const token = (JSON.parse(await child.line((line) => line.startsWith('{"held"'))) as { held: string }).held;

    const alive = inspected(checkout);
    expect(alive.lock.token).toBe(token);
    expect(alive.lock.pid).toBe(child.pid);
    expect(alive.verdict).toBe('live');
    expect(await unchangedCodeOf(place.stateHome, () => checkout.breakIfAbsent(alive.snapshot))).toBe('conflict');

    await killAndReap(child);
    const dead = inspected(checkout);
    expect(dead.verdict).toBe('absent');
    expect(dead.snapshot).toEqual(alive.snapshot);
    // A dead tool's lock still blocks a service: nothing expires by itself. Its holder is gone, so the word is quarantine.
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, BOUND))).toBe(
      'quarantine',
    );
    await expect(acquireWorkspace(coordination, ANY_PORT, BOUND)).rejects.toMatchObject({
      remedy: recoverRemedy(coordination.root, place.stateHome, 'absent'),
    });

    // The same bytes in a new file: the snapshot read before is stale.
    replaceFile(place.base, checkout.places.checkoutLock, dead.snapshot.bytes);
    expect(await unchangedCodeOf(place.stateHome, () => checkout.breakIfAbsent(dead.snapshot))).toBe('conflict');

    const current = inspected(checkout);
    expect(current.verdict).toBe('absent');
    await checkout.breakIfAbsent(current.snapshot);
    expect(checkout.inspect()).toBeUndefined();
    expect(existsSync(checkout.places.checkoutLock)).toBe(false);
    // Gone: the same snapshot again is a conflict, and the workspace is free.
    expect(await unchangedCodeOf(place.stateHome, () => checkout.breakIfAbsent(current.snapshot))).toBe('conflict');
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    lease.assert();
  });

  it("refuses a service owner's checkout lock (quarantine), live or stopping", async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'service-lock');
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    const checkout = checkoutOf(place, coordination.root);
    expect(await unchangedCodeOf(place.stateHome, () => checkout.breakIfAbsent(inspected(checkout).snapshot))).toBe(
      'quarantine',
    );
    lease.phase('stopping');
    expect(await unchangedCodeOf(place.stateHome, () => checkout.breakIfAbsent(inspected(checkout).snapshot))).toBe(
      'quarantine',
    );
    lease.assert();
  });

  it('refuses our own live plain lock (conflict)', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'own');
    const checkout = checkoutOf(place, coordination.root);
    const handle = await checkout.acquire();
    expect(await unchangedCodeOf(place.stateHome, () => checkout.breakIfAbsent(inspected(checkout).snapshot))).toBe(
      'conflict',
    );
    handle.assertOwner();
  });
});
