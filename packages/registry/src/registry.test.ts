import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import {
  ContractError,
  REGISTRY_BYTES,
  decodeBytes,
  encode,
  registryFormatSchema,
  registryLockSchema,
  registrySchema,
  type RegistryLock,
} from '@leasehold/contracts';
import { ownerStatus, type MutationStep } from '@leasehold/private-files';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, codeOfAsync, modeOf, namesIn, pathExists } from '@leasehold/test-utils';
import {
  bytesOf,
  initialised,
  makeStateHome,
  myProcessStart,
  reservation,
  reservations,
  withChangedField,
  writePrivateFile,
} from '../test/helpers.js';
import { DEFAULT_LOCK_WAIT_MS, NAMESPACE_FOLDER, Registry, type RegistryTransaction } from './index.js';

afterEach(cleanUp);

function decodeLock(path: string): RegistryLock {
  return decodeBytes(registryLockSchema, readFileSync(path), 8192, path);
}

describe('Registry construction', () => {
  it('places the registry below <state home>/v1/registry', () => {
    const stateHome = makeStateHome();
    const registry = new Registry(stateHome);
    expect(registry.folder).toBe(join(stateHome, NAMESPACE_FOLDER, 'registry'));
    expect(registry.formatPath).toBe(join(registry.folder, 'format.json'));
    expect(registry.rootsPath).toBe(join(registry.folder, 'roots.json'));
    expect(registry.lockPath).toBe(join(registry.folder, 'registry.lock'));
  });

  it.each(['relative/state', '/state/', '/a/../state', ''])('refuses the state home %j', async (stateHome) => {
    expect(await codeOfAsync(() => new Registry(stateHome))).toBe('refused');
  });
});

describe('transaction basics', () => {
  it('creates format.json and roots.json on an empty state home, private, and removes the lock', async () => {
    const stateHome = makeStateHome();
    const registry = new Registry(stateHome);
    expect(await codeOfAsync(() => registry.peek())).toBe('no error');
    expect(registry.peek()).toMatchObject({ entries: [], format: undefined, roots: undefined, locked: false });
    let inside: { entries: readonly unknown[]; dirty: boolean } | undefined;
    const result = await registry.transaction((transaction) => {
      inside = { entries: transaction.entries, dirty: transaction.dirty };
      return 'result';
    });
    expect(result).toBe('result');
    // Creating the registry is a write (SPEC 4 step 2).
    expect(inside).toEqual({ entries: [], dirty: true });
    expect(decodeBytes(registryFormatSchema, readFileSync(registry.formatPath), 8192, 'format.json')).toEqual({
      schema: 'leasehold.registry-format/1',
      stateHome,
    });
    expect(decodeBytes(registrySchema, readFileSync(registry.rootsPath), REGISTRY_BYTES, 'roots.json')).toEqual({
      schema: 'leasehold.registry/1',
      entries: [],
    });
    expect(pathExists(registry.lockPath)).toBe(false);
    expect(namesIn(registry.folder)).toEqual(['format.json', 'roots.json']);
    expect(modeOf(stateHome)).toBe(0o700);
    expect(modeOf(registry.namespace)).toBe(0o700);
    expect(modeOf(registry.folder)).toBe(0o700);
    expect(modeOf(registry.formatPath)).toBe(0o600);
    expect(modeOf(registry.rootsPath)).toBe(0o600);
    // No staging leftover.
    expect(namesIn(join(registry.namespace, '.staging'))).toEqual([]);
  });

  it('persists the entries of writeEntries for the next transaction and for peek', async () => {
    const { stateHome, registry } = await initialised();
    const written = reservations(stateHome, 3);
    await registry.transaction((transaction) => {
      expect(transaction.dirty).toBe(false);
      transaction.writeEntries(written);
      expect(transaction.dirty).toBe(true);
      expect(transaction.entries).toEqual(written);
    });
    expect(decodeBytes(registrySchema, readFileSync(registry.rootsPath), REGISTRY_BYTES, 'roots.json').entries).toEqual(
      written,
    );
    const seen = await new Registry(stateHome).transaction((transaction) => transaction.entries);
    expect(seen).toEqual(written);
    const peek = registry.peek();
    expect(peek.entries).toEqual(written);
    expect(peek.locked).toBe(false);
    expect(pathExists(registry.lockPath)).toBe(false);
    expect(await codeOfAsync(() => registry.peek())).toBe('no error');
  });

  it('lets an operation replace its own write within one transaction', async () => {
    const { stateHome, registry } = await initialised();
    await registry.transaction((transaction) => {
      transaction.writeEntries(reservations(stateHome, 2));
      transaction.assertHeld();
      transaction.writeEntries([reservation(stateHome, 7)]);
    });
    expect(registry.peek().entries.map((entry) => entry.root)).toEqual(['/srv/workspace-7']);
    expect(await codeOfAsync(() => registry.peek())).toBe('no error');
  });

  it('peek reports locked: true while a transaction runs, and the lock names this process', async () => {
    const { registry } = await initialised();
    await registry.transaction(async (transaction) => {
      const peek = registry.peek();
      expect(peek.locked).toBe(true);
      expect(peek.entries).toEqual([]);
      const state = registry.readLock();
      expect(state?.lock).toMatchObject({ pid: process.pid, host: hostname(), retained: false });
      expect(state?.holder).toBe('live');
      expect(await codeOfAsync(() => transaction.assertHeld())).toBe('no error');
      // A reader's snapshot taken under a writer's lock is already stale.
      expect(await codeOfAsync(() => registry.assertUnchanged(peek))).toBe('conflict');
    });
    expect(registry.peek().locked).toBe(false);
    expect(registry.readLock()).toBeUndefined();
  });

  it('assertUnchanged passes while nothing moved, and is conflict after another transaction wrote', async () => {
    const { stateHome, registry } = await initialised();
    const peek = registry.peek();
    expect(await codeOfAsync(() => registry.assertUnchanged(peek))).toBe('no error');
    await new Registry(stateHome).transaction((transaction) => transaction.writeEntries([reservation(stateHome, 1)]));
    expect(await codeOfAsync(() => registry.assertUnchanged(peek))).toBe('conflict');
    expect(await codeOfAsync(() => registry.assertUnchanged(registry.peek()))).toBe('no error');
  });

  it('assertUnchanged is conflict even after a rewrite with identical bytes', async () => {
    const { stateHome, registry } = await initialised();
    const entries = [reservation(stateHome, 1)];
    await registry.transaction((transaction) => transaction.writeEntries(entries));
    const peek = registry.peek();
    await registry.transaction((transaction) => transaction.writeEntries(entries));
    expect(registry.peek().roots?.identity).toBe(peek.roots?.identity);
    expect(await codeOfAsync(() => registry.assertUnchanged(peek))).toBe('conflict');
  });

  it('assertHeld is conflict once roots.json moved under the transaction, which then keeps no lock', async () => {
    const { stateHome, registry } = await initialised();
    const code = await codeOfAsync(
      registry.transaction((transaction) => {
        // Something that is not a registry writer changed the file: the snapshot no longer holds.
        writePrivateFile(registry.rootsPath, encode({ schema: 'leasehold.registry/1', entries: [] }));
        transaction.writeEntries([reservation(stateHome, 1)]);
      }),
    );
    expect(code).toBe('conflict');
    expect(pathExists(registry.lockPath)).toBe(false);
  });
});

describe('initialisation states', () => {
  it('completes an interrupted initialisation (format alone): roots.json is recreated with no entries', async () => {
    const { registry } = await initialised();
    const format = bytesOf(registry.formatPath);
    rmSync(registry.rootsPath);
    const peek = registry.peek();
    expect(peek.entries).toEqual([]);
    expect(peek.roots).toBeUndefined();
    expect(peek.format).toBeDefined();
    const inside = await registry.transaction((transaction) => ({ entries: transaction.entries, dirty: transaction.dirty }));
    expect(inside).toEqual({ entries: [], dirty: true });
    expect(decodeBytes(registrySchema, readFileSync(registry.rootsPath), REGISTRY_BYTES, 'roots.json')).toEqual({
      schema: 'leasehold.registry/1',
      entries: [],
    });
    expect(bytesOf(registry.formatPath)).toBe(format);
    expect(pathExists(registry.lockPath)).toBe(false);
    expect(await codeOfAsync(() => registry.peek())).toBe('no error');
  });

  it('refuses roots.json without format.json, in peek and in a transaction, and keeps no lock', async () => {
    const { stateHome, registry } = await initialised();
    await registry.transaction((transaction) => transaction.writeEntries([reservation(stateHome, 1)]));
    const roots = bytesOf(registry.rootsPath);
    rmSync(registry.formatPath);
    expect(await codeOfAsync(() => registry.peek())).toBe('refused');
    let ran = false;
    expect(
      await codeOfAsync(
        registry.transaction(() => {
          ran = true;
        }),
      ),
    ).toBe('refused');
    expect(ran).toBe(false);
    expect(bytesOf(registry.rootsPath)).toBe(roots);
    expect(pathExists(registry.formatPath)).toBe(false);
    expect(pathExists(registry.lockPath)).toBe(false);
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('refused');
  });

  it('refuses a format.json of another state home, in peek and in a transaction', async () => {
    const { registry } = await initialised();
    writePrivateFile(registry.formatPath, encode({ schema: 'leasehold.registry-format/1', stateHome: '/elsewhere' }));
    expect(await codeOfAsync(() => registry.peek())).toBe('refused');
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('refused');
    expect(pathExists(registry.lockPath)).toBe(false);
    // Format alone of another state home is not completed either.
    rmSync(registry.rootsPath);
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('refused');
    expect(pathExists(registry.rootsPath)).toBe(false);
    expect(pathExists(registry.lockPath)).toBe(false);
  });

  it('refuses an unexpected entry in the registry folder, in peek and in a transaction', async () => {
    const { registry } = await initialised();
    const roots = bytesOf(registry.rootsPath);
    writePrivateFile(join(registry.folder, 'notes.txt'), 'hello');
    expect(await codeOfAsync(() => registry.peek())).toBe('refused');
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('refused');
    expect(bytesOf(registry.rootsPath)).toBe(roots);
    expect(pathExists(registry.lockPath)).toBe(false);
  });
});

describe('failure semantics', () => {
  it('rethrows an error thrown before any write and removes the lock', async () => {
    const { registry } = await initialised();
    const roots = bytesOf(registry.rootsPath);
    const thrown = new ContractError('unavailable', 'the operation gave up');
    const attempt = registry.transaction(() => {
      throw thrown;
    });
    await expect(attempt).rejects.toBe(thrown);
    expect(await codeOfAsync(attempt)).toBe('unavailable');
    expect(pathExists(registry.lockPath)).toBe(false);
    expect(bytesOf(registry.rootsPath)).toBe(roots);
    expect(registry.peek().locked).toBe(false);
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('no error');
  });

  it('rethrows an async rejection before any write and removes the lock', async () => {
    const { registry } = await initialised();
    const thrown = new ContractError('conflict', 'rejected later');
    const attempt = registry.transaction(async () => {
      await Promise.resolve();
      throw thrown;
    });
    await expect(attempt).rejects.toBe(thrown);
    expect(await codeOfAsync(attempt)).toBe('conflict');
    expect(pathExists(registry.lockPath)).toBe(false);
  });

  it('keeps the lock as retained after a failure that follows a write; others answer quarantine at once', async () => {
    const { stateHome, registry } = await initialised();
    const written = [reservation(stateHome, 1)];
    const thrown = new ContractError('unavailable', 'failed after the write');
    const attempt = registry.transaction((transaction) => {
      transaction.writeEntries(written);
      throw thrown;
    });
    await expect(attempt).rejects.toBe(thrown);
    expect(await codeOfAsync(attempt)).toBe('unavailable');
    const lock = decodeLock(registry.lockPath);
    expect(lock).toMatchObject({ schema: 'leasehold.registry-lock/1', pid: process.pid, host: hostname(), retained: true });
    expect(modeOf(registry.lockPath)).toBe(0o600);
    // The write happened: the state is uncertain, not rolled back.
    expect(registry.peek().entries).toEqual(written);
    expect(registry.peek().locked).toBe(true);
    expect(registry.readLock()?.lock.retained).toBe(true);
    // A retained lock is a fence even though its holder (this process) is live: no wait, no busy.
    let ran = false;
    const waiter = new Registry(stateHome, { lockWaitMs: 60_000 });
    expect(
      await codeOfAsync(
        waiter.transaction(() => {
          ran = true;
        }),
      ),
    ).toBe('quarantine');
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('quarantine');
    expect(ran).toBe(false);
    expect(decodeLock(registry.lockPath)).toEqual(lock);
  });

  it('retains the lock when an operation fails after completing an interrupted initialisation (a write)', async () => {
    const { registry } = await initialised();
    rmSync(registry.rootsPath);
    const thrown = new Error('after initialisation');
    await expect(
      registry.transaction(() => {
        throw thrown;
      }),
    ).rejects.toBe(thrown);
    expect(decodeLock(registry.lockPath).retained).toBe(true);
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('quarantine');
  });

  it('uses a default lock wait of two seconds', () => {
    expect(DEFAULT_LOCK_WAIT_MS).toBe(2000);
  });
});

describe('locks left by hand', () => {
  function writeLock(registry: Registry, fields: Partial<RegistryLock>): void {
    const lock: RegistryLock = {
      schema: 'leasehold.registry-lock/1',
      token: randomUUID(),
      pid: process.pid,
      host: hostname(),
      processStart: myProcessStart(),
      retained: false,
      ...fields,
    };
    writePrivateFile(registry.lockPath, encode(lock));
  }

  it('a lock naming this pid with another process start time is absent: quarantine, and it stays', async () => {
    const { registry } = await initialised();
    const processStart = withChangedField(myProcessStart(), 3);
    writeLock(registry, { processStart });
    expect(ownerStatus(process.pid, hostname(), processStart)).toBe('absent');
    expect(registry.readLock()?.holder).toBe('absent');
    const before = bytesOf(registry.lockPath);
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('quarantine');
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('quarantine');
    expect(bytesOf(registry.lockPath)).toBe(before);
    expect(registry.peek().locked).toBe(true);
  });

  it('a lock of another PID namespace is ambiguous: quarantine', async () => {
    const { registry } = await initialised();
    const processStart = withChangedField(myProcessStart(), 2);
    writeLock(registry, { processStart });
    expect(ownerStatus(process.pid, hostname(), processStart)).toBe('ambiguous');
    expect(registry.readLock()?.holder).toBe('ambiguous');
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('quarantine');
  });

  it('a lock of another boot is absent: quarantine', async () => {
    const { registry } = await initialised();
    writeLock(registry, { processStart: withChangedField(myProcessStart(), 1) });
    expect(registry.readLock()?.holder).toBe('absent');
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('quarantine');
  });

  it('a lock of another host is ambiguous: quarantine', async () => {
    const { registry } = await initialised();
    writeLock(registry, { host: `${hostname()}-elsewhere` });
    expect(registry.readLock()?.holder).toBe('ambiguous');
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('quarantine');
  });

  it('a retained lock of this very process is quarantine, not a wait', async () => {
    const { stateHome, registry } = await initialised();
    writeLock(registry, { retained: true });
    expect(registry.readLock()?.holder).toBe('live');
    expect(await codeOfAsync(new Registry(stateHome, { lockWaitMs: 60_000 }).transaction(() => undefined))).toBe('quarantine');
  });

  it('a live lock (this process, not retained) is a short hold: busy after the wait', async () => {
    const { stateHome, registry } = await initialised();
    writeLock(registry, {});
    expect(registry.readLock()?.holder).toBe('live');
    expect(await codeOfAsync(new Registry(stateHome, { lockWaitMs: 50 }).transaction(() => undefined))).toBe('busy');
    expect(pathExists(registry.lockPath)).toBe(true);
  });

  it('a malformed lock is refused, and left in place', async () => {
    const { registry } = await initialised();
    writePrivateFile(registry.lockPath, '{"schema":"leasehold.registry-lock/1"}');
    expect(await codeOfAsync(() => registry.readLock())).toBe('refused');
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('refused');
    expect(bytesOf(registry.lockPath)).toBe(Buffer.from('{"schema":"leasehold.registry-lock/1"}').toString('hex'));
  });
});

describe('the order of mutations', () => {
  it('creates registry.lock first, then replaces roots.json, then removes registry.lock last', async () => {
    const { stateHome } = await initialised();
    const steps: MutationStep[] = [];
    const hooked = new Registry(stateHome, {
      hooks: {
        beforeMutation(step) {
          steps.push({ operation: step.operation, action: step.action, path: step.path });
        },
      },
    });
    const write = (transaction: RegistryTransaction) => transaction.writeEntries([reservation(stateHome, 1)]);
    expect(await codeOfAsync(hooked.transaction(write))).toBe('no error');
    const staging = join(hooked.namespace, '.staging');
    const inStaging = (path: string) => path.startsWith(`${staging}/`);
    // Operations in order, runs collapsed: create (the lock), replace (roots), remove (the lock).
    const operations = steps.map((step) => step.operation).filter((operation, index, all) => all[index - 1] !== operation);
    expect(operations).toEqual(['create', 'replace', 'remove']);
    const create = steps.filter((step) => step.operation === 'create');
    const replace = steps.filter((step) => step.operation === 'replace');
    const remove = steps.filter((step) => step.operation === 'remove');
    // create: staged temp written and fsynced, linked to registry.lock, temp unlinked, folder fsynced.
    expect(create.map((step) => step.action)).toEqual(['write', 'fsync', 'link', 'unlink', 'fsync-directory']);
    expect(create.find((step) => step.action === 'link')?.path).toBe(hooked.lockPath);
    expect(create.filter((step) => step.action !== 'link' && step.action !== 'fsync-directory').every((step) => inStaging(step.path))).toBe(
      true,
    );
    expect(create.at(-1)?.path).toBe(hooked.folder);
    // replace: staged temp, renamed over roots.json, folder fsynced.
    expect(replace.map((step) => step.action)).toEqual(['write', 'fsync', 'rename', 'fsync-directory']);
    expect(replace.find((step) => step.action === 'rename')?.path).toBe(hooked.rootsPath);
    // remove: the lock unlinked, folder fsynced; nothing after it.
    expect(remove).toEqual([
      { operation: 'remove', action: 'unlink', path: hooked.lockPath },
      { operation: 'remove', action: 'fsync-directory', path: hooked.folder },
    ]);
    expect(steps.at(-1)).toEqual({ operation: 'remove', action: 'fsync-directory', path: hooked.folder });
    expect(pathExists(hooked.lockPath)).toBe(false);
  });

  it('an error injected at the rename of roots.json retains the lock and leaves roots.json as it was', async () => {
    const { stateHome, registry } = await initialised();
    const roots = bytesOf(registry.rootsPath);
    const injected = new Error('injected before rename');
    const hooked = new Registry(stateHome, {
      hooks: {
        beforeMutation(step) {
          // Only roots.json: the rewrite of the lock as retained is a rename too.
          if (step.operation === 'replace' && step.action === 'rename' && step.path === registry.rootsPath) throw injected;
        },
      },
    });
    await expect(
      hooked.transaction((transaction) => transaction.writeEntries([reservation(stateHome, 1)])),
    ).rejects.toBe(injected);
    expect(bytesOf(registry.rootsPath)).toBe(roots);
    expect(decodeLock(registry.lockPath).retained).toBe(true);
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('quarantine');
    // The failed writer's staged temp was discarded.
    expect(namesIn(join(registry.namespace, '.staging'))).toEqual([]);
  });

  it('an error injected while creating the lock leaves no lock and nothing written', async () => {
    const { stateHome, registry } = await initialised();
    const roots = bytesOf(registry.rootsPath);
    const injected = new Error('injected before link');
    const hooked = new Registry(stateHome, {
      hooks: {
        beforeMutation(step) {
          if (step.operation === 'create' && step.action === 'link') throw injected;
        },
      },
    });
    let ran = false;
    await expect(
      hooked.transaction(() => {
        ran = true;
      }),
    ).rejects.toBe(injected);
    expect(ran).toBe(false);
    expect(pathExists(registry.lockPath)).toBe(false);
    expect(bytesOf(registry.rootsPath)).toBe(roots);
    expect(await codeOfAsync(registry.transaction(() => undefined))).toBe('no error');
  });
});
