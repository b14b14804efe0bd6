import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, codeOfAsync, killAndReap, namesIn, pathExists } from '@leasehold/test-utils';
import { bytesOf, initialised, linksOf, reservation, spawnFixture, spawnHolder } from '../test/helpers.js';
import { Registry } from './index.js';

afterEach(cleanUp);

describe('a live holder', () => {
  it('makes a second writer wait and then answer busy; once it finishes, a transaction succeeds', async () => {
    const { stateHome, registry } = await initialised();
    const holder = await spawnHolder(stateHome);
    const state = registry.readLock();
    expect(state?.lock).toMatchObject({ pid: holder.pid, retained: false });
    expect(state?.holder).toBe('live');
    expect(registry.peek().locked).toBe(true);

    let ran = false;
    const waiter = new Registry(stateHome, { lockWaitMs: 200 });
    expect(
      await codeOfAsync(
        waiter.transaction(() => {
          ran = true;
        }),
      ),
    ).toBe('busy');
    expect(ran).toBe(false);
    // The wait took nothing from the holder.
    expect(registry.readLock()?.lock.pid).toBe(holder.pid);

    holder.send('release');
    await holder.line('done');
    expect((await holder.closed).code).toBe(0);
    expect(pathExists(registry.lockPath)).toBe(false);
    expect(registry.readLock()).toBeUndefined();
    const written = [reservation(stateHome, 1)];
    expect(await codeOfAsync(waiter.transaction((transaction) => transaction.writeEntries(written)))).toBe('no error');
    expect(registry.peek().entries).toEqual(written);
  });

  it('lets a waiter succeed when it finishes within the wait', async () => {
    const { stateHome, registry } = await initialised();
    const holder = await spawnHolder(stateHome);
    const waiter = new Registry(stateHome, { lockWaitMs: 30_000 });
    const written = [reservation(stateHome, 1)];
    // transaction() runs synchronously up to its first wait: by the time it
    // returns, it has found the holder's lock and is waiting for it.
    const attempt = waiter.transaction((transaction) => {
      transaction.writeEntries(written);
      return 'written';
    });
    expect(registry.readLock()?.lock.pid).toBe(holder.pid);
    holder.send('release');
    await expect(attempt).resolves.toBe('written');
    expect((await holder.closed).code).toBe(0);
    expect(registry.peek().entries).toEqual(written);
    expect(pathExists(registry.lockPath)).toBe(false);
  });
});

describe('a dead holder', () => {
  it('SIGKILLed while holding leaves a fence: quarantine, never expiring; readLock tells live, then absent', async () => {
    const { stateHome, registry } = await initialised();
    const roots = bytesOf(registry.rootsPath);
    const holder = await spawnHolder(stateHome);
    expect(registry.readLock()?.holder).toBe('live');
    const end = await killAndReap(holder);
    expect(end.signal).toBe('SIGKILL');

    const state = registry.readLock();
    expect(state?.lock).toMatchObject({ pid: holder.pid, retained: false });
    expect(state?.holder).toBe('absent');
    const lock = bytesOf(registry.lockPath);
    // A long wait bound changes nothing: a dead holder's lock is not a short hold.
    const waiter = new Registry(stateHome, { lockWaitMs: 60_000 });
    let ran = false;
    const operation = () => {
      ran = true;
    };
    expect(await codeOfAsync(waiter.transaction(operation))).toBe('quarantine');
    expect(await codeOfAsync(waiter.transaction(operation))).toBe('quarantine');
    expect(await codeOfAsync(registry.transaction(operation))).toBe('quarantine');
    expect(ran).toBe(false);
    expect(bytesOf(registry.lockPath)).toBe(lock);
    expect(bytesOf(registry.rootsPath)).toBe(roots);
    expect(registry.peek().locked).toBe(true);
  });

  it('killed mid-publication of registry.lock (second link left): the next transaction sweeps and answers quarantine', async () => {
    const { stateHome, registry } = await initialised();
    const roots = bytesOf(registry.rootsPath);
    const staging = join(registry.namespace, '.staging');
    const child = spawnFixture('holder.mjs', ['die-publishing', stateHome]);
    const end = await child.closed;
    expect(end.signal).toBe('SIGKILL');
    expect(child.lines).toEqual([]);

    // The lock is published, and the dead writer's temp is still a second link of it.
    expect(linksOf(registry.lockPath)).toBe(2);
    expect(namesIn(staging)).toHaveLength(1);
    expect(await codeOfAsync(() => registry.readLock())).toBe('refused');

    let ran = false;
    const waiter = new Registry(stateHome, { lockWaitMs: 60_000 });
    expect(
      await codeOfAsync(
        waiter.transaction(() => {
          ran = true;
        }),
      ),
    ).toBe('quarantine');
    expect(ran).toBe(false);
    // The sweep removed the leftover: a whole, single-link lock naming the dead child.
    expect(namesIn(staging)).toEqual([]);
    expect(linksOf(registry.lockPath)).toBe(1);
    const state = registry.readLock();
    expect(state?.lock).toMatchObject({ pid: child.pid, retained: false });
    expect(state?.holder).toBe('absent');
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('quarantine');
    expect(bytesOf(registry.rootsPath)).toBe(roots);
    expect(registry.peek().locked).toBe(true);
  });
});
