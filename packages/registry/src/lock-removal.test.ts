import { hostname } from 'node:os';
import { ownerStatus } from '@leasehold/private-files';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, codeOfAsync, messageOf, messagesOf, namesIn, pathExists } from '@leasehold/test-utils';
import {
  bytesOf,
  initialised,
  lockAt,
  markersIn,
  myProcessStart,
  reservation,
  spawnTransactor,
  writePrivateFile,
} from '../test/helpers.js';
import { Registry } from './index.js';

afterEach(cleanUp);

/** An error as the file system gives it: an Error with an errno code. */
function ioError(step: string): Error {
  return Object.assign(new Error(`injected EIO before ${step}`), { code: 'EIO' });
}

/** A registry whose hook throws EIO before the step `<operation> <action> <path>` equal to `shown`, once. */
function failingAt(stateHome: string, shown: (registry: Registry) => string): Registry {
  let failed = false;
  const registry: Registry = new Registry(stateHome, {
    hooks: {
      beforeMutation(step) {
        const here = `${step.operation} ${step.action} ${step.path}`;
        if (!failed && here === shown(registry)) {
          failed = true;
          throw ioError(here);
        }
      },
    },
  });
  return registry;
}

const unlinkOfLock = (registry: Registry) => `remove unlink ${registry.layout.registryLock}`;

describe('a failed removal of the lock', () => {
  it('the transaction resolves with its result; the lock stays, naming this live process; others wait and answer busy; this process takes it over', async () => {
    const { stateHome, registry } = await initialised();
    const row = reservation(stateHome, 1);
    const hooked = failingAt(stateHome, unlinkOfLock);
    await expect(
      hooked.transaction(row.root, (transaction) => {
        transaction.reserve(row);
        return 'reserved';
      }),
    ).resolves.toBe('reserved');
    // The write stands; the lock is still there, whole, naming this process and the root.
    expect(registry.list().entries).toEqual([row]);
    const left = registry.readLock();
    expect(left?.lock).toMatchObject({
      pid: process.pid,
      host: hostname(),
      processStart: myProcessStart(),
      root: row.root,
    });
    // Its holder is live, but within this process the lock is known to guard nothing: readLock tells it apart.
    expect(ownerStatus(left!.lock.pid, left!.lock.host, left!.lock.processStart)).toBe('live');
    expect(left?.verdict).toBe('absent');
    const lock = bytesOf(registry.layout.registryLock);

    // Another process cannot tell it from a live hold: it waits, then answers busy, running nothing.
    const other = reservation(stateHome, 2);
    const child = spawnTransactor({ stateHome, root: other.root, reserve: other, lockWaitMs: 100 });
    expect((await child.closed).code).toBe(1);
    expect(messagesOf(child, 'error').map((message) => message.error)).toEqual(['busy']);
    expect(messagesOf(child, 'step')).toEqual([]);
    expect(bytesOf(registry.layout.registryLock)).toBe(lock);
    expect(registry.list().entries).toEqual([row]);

    // This same process knows the lock guards nothing: its next transaction takes it over, at once.
    const next = reservation(stateHome, 3);
    const seen = await new Registry(stateHome, { lockWaitMs: 0 }).transaction(next.root, (transaction) => {
      transaction.reserve(next);
      return registry.readLock()?.lock;
    });
    expect(seen).toMatchObject({ pid: process.pid, root: next.root });
    expect(seen?.token).not.toBe(left?.lock.token);
    expect(registry.list().entries).toEqual([row, next]);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    expect(namesIn(registry.layout.staging)).toEqual([]);

    // And then others are not held up any more.
    const after = spawnTransactor({ stateHome, root: other.root, reserve: other, lockWaitMs: 100 });
    expect((await after.closed).code).toBe(0);
    expect(registry.list().entries).toEqual([row, next, other]);
  });

  it("after a failed operation, the operation's error is what the transaction rejects with; the lock stays for this process to take over", async () => {
    const { stateHome, registry } = await initialised();
    const thrown = new Error('the operation failed');
    const hooked = failingAt(stateHome, unlinkOfLock);
    await expect(
      hooked.transaction('/srv/a', () => {
        throw thrown;
      }),
    ).rejects.toBe(thrown);
    expect(registry.readLock()?.lock).toMatchObject({ pid: process.pid, root: '/srv/a' });
    expect(await codeOfAsync(registry.transaction('/srv/b', () => undefined))).toBe('no error');
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    expect(markersIn(stateHome)).toEqual([]);
  });

  it('a lock left by a process whose removal failed is taken over by anyone once that process has exited', async () => {
    const { stateHome, registry } = await initialised();
    const row = reservation(stateHome, 1);
    const child = spawnTransactor({ stateHome, root: row.root, reserve: row, failAt: unlinkOfLock(registry) });
    expect((await child.closed).code).toBe(0);
    expect(messagesOf(child, 'done')).toHaveLength(1);
    expect(lockAt(registry.layout.registryLock)).toMatchObject({ pid: child.pid, root: row.root });
    expect(registry.readLock()?.verdict).toBe('absent');
    const next = reservation(stateHome, 2);
    await new Registry(stateHome, { lockWaitMs: 0 }).transaction(next.root, (transaction) => transaction.reserve(next));
    expect(registry.list().entries).toEqual([row, next]);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
  });

  it("the unlink has no folder fsync after it: a power loss may bring the lock back, and the next writer takes the dead holder's lock over", async () => {
    const { stateHome, registry } = await initialised();
    const row = reservation(stateHome, 1);
    // The writer stops right before it unlinks its lock: its bytes are what a power loss that lost the unlink brings back.
    const child = spawnTransactor({
      stateHome,
      root: row.root,
      reserve: row,
      pauseAt: [`^${unlinkOfLock(registry)}$`],
    });
    expect(await messageOf(child, 'paused')).toMatchObject({ paused: { operation: 'remove', action: 'unlink' } });
    const lock = bytesOf(registry.layout.registryLock)!;
    child.send('go');
    expect((await child.closed).code).toBe(0);
    expect(messagesOf(child, 'done')).toHaveLength(1);
    // The unlink is the transaction's last step: no folder fsync makes the removal durable.
    expect(messagesOf(child, 'step').at(-1)).toMatchObject({
      step: { operation: 'remove', action: 'unlink', path: registry.layout.registryLock },
    });
    expect(pathExists(registry.layout.registryLock)).toBe(false);

    // The power loss: the removal is lost, the lock is back, whole (its data was fsynced before its link), naming a dead holder.
    writePrivateFile(registry.layout.registryLock, Buffer.from(lock, 'hex'));
    expect(registry.readLock()).toMatchObject({ lock: { pid: child.pid, root: row.root }, verdict: 'absent' });
    expect(registry.list().entries).toEqual([row]);
    // It fences nothing: even a writer that waits not at all takes it over, and the table the lost removal followed stands.
    const next = reservation(stateHome, 2);
    const seen = await new Registry(stateHome, { lockWaitMs: 0 }).transaction(next.root, (transaction) => {
      transaction.reserve(next);
      return registry.readLock()?.lock;
    });
    expect(seen).toMatchObject({ pid: process.pid, root: next.root });
    expect(registry.list().entries).toEqual([row, next]);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    expect(namesIn(registry.layout.staging)).toEqual([]);
  });
});
