import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  codeOfAsync,
  killAndReap,
  lockCreateSteps,
  lockRemoveSteps,
  messagesOf,
  namesIn,
  pathExists,
  replaceSteps,
  spawnFixture,
} from '@leasehold/test-utils';
import {
  bytesOf,
  failedTransaction,
  FIXTURES,
  initialised,
  linksOf,
  lockAt,
  markersIn,
  reservation,
  reservations,
  reserveAll,
  shownSteps,
  spawnHolder,
  spawnTransactor,
} from '../test/helpers.js';
import { Registry } from './index.js';

afterEach(cleanUp);

describe('a live holder', () => {
  it('makes a second writer wait and then answer busy; once it finishes, a transaction succeeds', async () => {
    const { stateHome, registry } = await initialised();
    const holder = await spawnHolder(stateHome, '/srv/holder');
    const state = registry.readLock();
    expect(state?.lock).toMatchObject({ pid: holder.pid, root: '/srv/holder' });
    expect(state?.verdict).toBe('live');
    const lock = bytesOf(registry.layout.registryLock);

    const waiter = new Registry(stateHome, { lockWaitMs: 200 });
    expect(await failedTransaction(waiter, '/srv/workspace-1')).toEqual({ code: 'busy', ran: false });
    // The wait took nothing from the holder.
    expect(bytesOf(registry.layout.registryLock)).toBe(lock);
    expect(markersIn(stateHome)).toEqual([]);

    holder.send('release');
    await holder.line('done');
    expect((await holder.closed).code).toBe(0);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    expect(registry.readLock()).toBeUndefined();
    const written = reservation(stateHome, 1);
    expect(await codeOfAsync(waiter.transaction(written.root, (transaction) => transaction.reserve(written)))).toBe(
      'no error',
    );
    expect(registry.list().entries).toEqual([written]);
  });

  it('lets a waiter succeed when it finishes within the wait', async () => {
    const { stateHome, registry } = await initialised();
    const holder = await spawnHolder(stateHome);
    const waiter = new Registry(stateHome, { lockWaitMs: 30_000 });
    const written = reservation(stateHome, 1);
    // transaction() runs synchronously up to its first wait: by the time it
    // returns, it has found the holder's lock and is waiting for it.
    const attempt = waiter.transaction(written.root, (transaction) => {
      transaction.reserve(written);
      return 'written';
    });
    expect(registry.readLock()?.lock.pid).toBe(holder.pid);
    holder.send('release');
    await expect(attempt).resolves.toBe('written');
    expect((await holder.closed).code).toBe(0);
    expect(registry.list().entries).toEqual([written]);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
  });

  it('readers never look at the lock: list and rowOf answer normally while another process holds it', async () => {
    const { stateHome, registry } = await initialised();
    const rows = reservations(stateHome, 3);
    await reserveAll(registry, rows);
    const before = registry.list();
    const holder = await spawnHolder(stateHome, '/srv/workspace-1');
    expect(registry.readLock()?.verdict).toBe('live');
    const reader = new Registry(stateHome, { lockWaitMs: 0 });
    expect(reader.list()).toEqual(before);
    expect(reader.rowOf('/srv/workspace-1').row).toEqual(rows[1]);
    expect(reader.rowOf('/srv/workspace-9')).toEqual({ row: undefined, roots: before.roots });
    expect(reader.checkStateHome()).toBe(true);
    holder.send('release');
    expect((await holder.closed).code).toBe(0);
  });
});

describe('a dead holder', () => {
  it('SIGKILLed while holding: readLock tells live, then absent; the next transaction of any root takes the lock over, the table whole', async () => {
    const { stateHome, registry } = await initialised();
    const rows = reservations(stateHome, 2);
    await reserveAll(registry, rows);
    const holder = await spawnHolder(stateHome, '/srv/workspace-0');
    expect(registry.readLock()?.verdict).toBe('live');
    const end = await killAndReap(holder);
    expect(end.signal).toBe('SIGKILL');

    const state = registry.readLock();
    expect(state?.lock).toMatchObject({ pid: holder.pid, root: '/srv/workspace-0' });
    expect(state?.verdict).toBe('absent');
    // Readers go on as before.
    expect(registry.list().entries).toEqual(rows);
    // A dead holder's lock is no short hold: even a writer that waits not at all takes it over, for another root.
    const taker = new Registry(stateHome, { lockWaitMs: 0 });
    const added = reservation(stateHome, 5);
    const seen = await taker.transaction(added.root, (transaction) => {
      expect(transaction.entries).toEqual(rows);
      transaction.reserve(added);
      return registry.readLock();
    });
    expect(seen?.lock).toMatchObject({ pid: process.pid, host: hostname(), root: added.root });
    expect(seen?.lock.token).not.toBe(state?.lock.token);
    expect(seen?.verdict).toBe('live');
    expect(registry.list().entries).toEqual([...rows, added]);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    expect(namesIn(registry.layout.staging)).toEqual([]);
  });

  it('killed mid-publication of registry.lock (second link left): the next transaction sweeps the leftover and takes it over', async () => {
    const { stateHome, registry } = await initialised();
    const roots = bytesOf(registry.layout.roots);
    const child = spawnFixture(FIXTURES, 'holder.mjs', ['die-publishing', stateHome]);
    const end = await child.closed;
    expect(end.signal).toBe('SIGKILL');
    expect(child.lines).toEqual([]);

    // The lock is published, and the dead writer's temp is still a second link of it.
    expect(linksOf(registry.layout.registryLock)).toBe(2);
    expect(namesIn(registry.layout.staging)).toHaveLength(1);
    expect(await codeOfAsync(() => registry.readLock())).toBe('refused');
    expect(lockAt(registry.layout.registryLock)?.pid).toBe(child.pid);

    let inside: number | undefined;
    const waiter = new Registry(stateHome, { lockWaitMs: 0 });
    expect(
      await codeOfAsync(
        waiter.transaction('/srv/next', () => {
          // The sweep removed the leftover: the lock is ours now, whole and single-link.
          inside = linksOf(registry.layout.registryLock);
          expect(registry.readLock()?.lock).toMatchObject({ pid: process.pid, root: '/srv/next' });
        }),
      ),
    ).toBe('no error');
    expect(inside).toBe(1);
    expect(namesIn(registry.layout.staging)).toEqual([]);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    expect(bytesOf(registry.layout.roots)).toBe(roots);
  });
});

// The mutating steps of one transaction that reserves a row on an initialised
// registry (docs/ownership.md, "The registry transaction"): create the lock,
// replace roots.json, remove the lock.
const TRANSACTION_STEPS = [
  ...lockCreateSteps('state/v1/registry/registry.lock'),
  ...replaceSteps('state/v1/registry/roots.json'),
  ...lockRemoveSteps('state/v1/registry/registry.lock'),
];
const ROOTS_RENAMED = TRANSACTION_STEPS.indexOf('replace rename state/v1/registry/roots.json') + 1;

describe('a writer killed at every step of a transaction', () => {
  it('the dry run shows exactly the steps of create, replace and remove', async () => {
    const { stateHome } = await initialised();
    const row = reservation(stateHome, 1);
    const child = spawnTransactor({ stateHome, root: row.root, reserve: row });
    expect((await child.closed).code).toBe(0);
    expect(shownSteps(child, stateHome)).toEqual(TRANSACTION_STEPS);
  });

  it.each(TRANSACTION_STEPS.map((step, index) => [index + 1, step] as const))(
    'killed before step %i (%s): the next transaction of another root goes ahead, the table whole',
    async (killAt) => {
      const { stateHome, registry } = await initialised();
      const rows = reservations(stateHome, 2);
      await reserveAll(registry, rows);
      const killed = reservation(stateHome, 7);
      const child = spawnTransactor({ stateHome, root: killed.root, reserve: killed, killAt });
      expect((await child.closed).signal).toBe('SIGKILL');
      expect(shownSteps(child, stateHome)).toEqual(TRANSACTION_STEPS.slice(0, killAt));
      expect(messagesOf(child, 'done')).toEqual([]);
      // The table is whole either way: old, or new with the killed writer's row.
      const kept = killAt > ROOTS_RENAMED ? [...rows, killed] : rows;
      expect(registry.list().entries).toEqual(kept);

      const next = reservation(stateHome, 8);
      const seen = await new Registry(stateHome, { lockWaitMs: 0 }).transaction(next.root, (transaction) => {
        transaction.reserve(next);
        return registry.readLock()?.lock;
      });
      expect(seen).toMatchObject({ pid: process.pid, root: next.root });
      expect(registry.list().entries).toEqual([...kept, next]);
      expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
      expect(namesIn(registry.layout.staging)).toEqual([]);
    },
  );
});
