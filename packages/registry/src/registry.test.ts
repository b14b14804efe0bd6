import { randomUUID } from 'node:crypto';
import {
  chmodSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import {
  ContractError,
  REGISTRY_BYTES,
  decodeBytes,
  encode,
  registryFormatSchema,
  registryLockSchema,
  reservationTableSchema,
  type RegistryLock,
  type Reservation,
  NAMESPACE_ENTRIES,
  NAMESPACE_FOLDER,
  REGISTRY_FOLDER_ENTRIES,
  TAKEOVER_MARKER,
  isRegistryLockFile,
  stateHomeLayout,
  takeoverMarker,
} from '@leasehold/contracts';
import {
  PrivateFiles,
  ownerStatus,
  sameSnapshot,
  type FileSnapshot,
  type MutationStep,
} from '@leasehold/private-files';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  codeOfAsync,
  createSteps,
  handPlaces,
  modeOf,
  lockRemoveSteps,
  namesIn,
  pathExists,
  removeSteps,
  replaceSteps,
  shownStep,
  spawnChild,
} from '@leasehold/test-utils';
import {
  TEST_ROOT,
  bytesOf,
  failedTransaction,
  initialised,
  lockDocument,
  makeStateHome,
  markersIn,
  myProcessStart,
  reservation,
  reservations,
  shownPath,
  withChangedField,
  writePrivateFile,
} from '../test/helpers.js';
import { DEFAULT_LOCK_WAIT_MS, Registry, type GuardedWriter, type RegistryTransaction } from './index.js';

afterEach(cleanUp);

function decodeLock(path: string): RegistryLock {
  return decodeBytes(registryLockSchema, readFileSync(path), 8192, path);
}

function writeLock(registry: Registry, fields: Partial<RegistryLock>): RegistryLock {
  const lock = lockDocument(fields);
  writePrivateFile(registry.layout.registryLock, encode(lock));
  return lock;
}

/** The take-over marker path for `token`, computed by hand (docs/layout.md, "The registry folder", and the layout's TAKEOVER_MARKER). */
function markerPath(registry: Registry, token: string): string {
  return join(registry.layout.registry, `takeover-${token}.lock`);
}

/** What a transaction's writer publishes in the tests below. */
const PUBLISHED = encode({ schema: 'test/1' });

/** One workspace's private folder under the state home (its name is any 32 hex digits). */
function workspaceFolder(registry: Registry): string {
  return join(registry.layout.workspaces, '0'.repeat(32));
}

/** Writes `bytes` at `path` (making its folders, 0700) and answers its snapshot. */
function writtenByHand(registry: Registry, path: string, bytes: Uint8Array): FileSnapshot {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writePrivateFile(path, bytes);
  const snapshot = new PrivateFiles(registry.layout.namespace).read(path);
  if (snapshot === undefined) throw new Error(`${path}: not written`);
  return snapshot;
}

/** Every path under `folder` with its bytes (folders as `folder`), sorted; empty when it does not exist. */
function filesUnder(folder: string): [string, string][] {
  if (!pathExists(folder)) return [];
  const names = (readdirSync(folder, { recursive: true }) as string[]).sort();
  return names.map((name) => {
    const path = join(folder, name);
    return [name, lstatSync(path).isDirectory() ? 'folder' : (bytesOf(path) ?? '')];
  });
}

/** What nothing-written means: the table, the format and the lock as they were, no marker, no staging leftover. */
function stateOf(registry: Registry) {
  return {
    roots: bytesOf(registry.layout.roots),
    format: bytesOf(registry.layout.registryFormat),
    lock: bytesOf(registry.layout.registryLock),
    registry: namesIn(registry.layout.registry),
    staging: namesIn(registry.layout.staging),
  };
}

describe('Registry construction', () => {
  it('places every state-home-wide file where docs/layout.md says (checked against hand-computed paths)', () => {
    const stateHome = makeStateHome();
    const registry = new Registry(stateHome);
    const hand = handPlaces(stateHome, '/srv/any');
    expect(registry.layout).toEqual({
      stateHome,
      namespace: hand.namespace,
      staging: hand.staging,
      registry: join(stateHome, NAMESPACE_FOLDER, 'registry'),
      registryFormat: hand.registryFormat,
      roots: hand.roots,
      registryLock: hand.registryLock,
      journal: hand.journal,
      workspaces: join(hand.namespace, 'workspaces'),
    });
    expect(dirname(hand.roots)).toBe(registry.layout.registry);
    expect(stateHomeLayout(stateHome)).toEqual(registry.layout);
    expect(NAMESPACE_FOLDER).toBe('v1');
    expect([...NAMESPACE_ENTRIES]).toEqual(['registry', 'journal', 'workspaces']);
  });

  it.each(['relative/state', '/state/', '/a/../state', ''])('refuses the state home %j', async (stateHome) => {
    expect(await codeOfAsync(() => new Registry(stateHome))).toBe('refused');
    expect(await codeOfAsync(() => stateHomeLayout(stateHome))).toBe('refused');
  });

  it('tells the registry lock and its take-over markers from every other path', () => {
    const layout = stateHomeLayout('/srv/state');
    expect(isRegistryLockFile(layout.registryLock)).toBe(true);
    expect(isRegistryLockFile(takeoverMarker(layout, randomUUID()))).toBe(true);
    for (const path of [
      layout.roots,
      layout.registry,
      join(layout.registry, 'takeover-x.lock'),
      join(layout.journal, 'registry.lock'),
      '/registry.lock',
      '/',
      'registry/registry.lock',
    ]) {
      expect(isRegistryLockFile(path), path).toBe(false);
    }
  });

  it.each(['relative/root', '/srv/a/', '/srv/../a', ''])(
    'refuses a transaction for the root %j, writing nothing',
    async (root) => {
      const stateHome = makeStateHome();
      const registry = new Registry(stateHome);
      expect(await failedTransaction(registry, root)).toEqual({ code: 'refused', ran: false });
      expect(pathExists(stateHome)).toBe(false);
    },
  );
});

describe('transaction basics', () => {
  it('creates format.json and roots.json on an empty state home, private, and removes the lock', async () => {
    const stateHome = makeStateHome();
    const registry = new Registry(stateHome);
    expect(registry.checkStateHome()).toBe(false);
    expect(registry.list()).toEqual({ entries: [], format: undefined, roots: undefined });
    expect(registry.rowOf('/srv/a')).toEqual({ row: undefined, roots: undefined });
    // Readers create nothing.
    expect(pathExists(stateHome)).toBe(false);
    let inside: { entries: readonly unknown[]; root: string } | undefined;
    const result = await registry.transaction('/srv/a', (transaction) => {
      inside = { entries: transaction.entries, root: transaction.root };
      return 'result';
    });
    expect(result).toBe('result');
    expect(inside).toEqual({ entries: [], root: '/srv/a' });
    expect(
      decodeBytes(registryFormatSchema, readFileSync(registry.layout.registryFormat), 8192, 'format.json'),
    ).toEqual({
      schema: 'leasehold.registry-format/1',
      stateHome,
    });
    expect(
      decodeBytes(reservationTableSchema, readFileSync(registry.layout.roots), REGISTRY_BYTES, 'roots.json'),
    ).toEqual({
      schema: 'leasehold.registry/1',
      entries: [],
    });
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    expect(modeOf(stateHome)).toBe(0o700);
    expect(modeOf(registry.layout.namespace)).toBe(0o700);
    expect(modeOf(registry.layout.registry)).toBe(0o700);
    expect(modeOf(registry.layout.registryFormat)).toBe(0o600);
    expect(modeOf(registry.layout.roots)).toBe(0o600);
    // No staging leftover.
    expect(namesIn(registry.layout.staging)).toEqual([]);
    expect(registry.checkStateHome()).toBe(true);
    expect(registry.list().entries).toEqual([]);
  });

  it('persists the rows of reserve for the next transaction, for list and for rowOf', async () => {
    const { stateHome, registry } = await initialised();
    const written = reservations(stateHome, 3);
    await registry.transaction('/srv/workspace-0', (transaction) => {
      for (const [index, row] of written.entries()) {
        expect(transaction.rowOf(row.root)).toBeUndefined();
        transaction.reserve(row);
        expect(transaction.rowOf(row.root)).toEqual(row);
        expect(transaction.entries).toEqual(written.slice(0, index + 1));
      }
    });
    expect(
      decodeBytes(reservationTableSchema, readFileSync(registry.layout.roots), REGISTRY_BYTES, 'roots.json').entries,
    ).toEqual(written);
    const seen = await new Registry(stateHome).transaction(TEST_ROOT, (transaction) => transaction.entries);
    expect(seen).toEqual(written);
    const view = registry.list();
    expect(view.entries).toEqual(written);
    for (const row of written) {
      const read = registry.rowOf(row.root);
      expect(read.row).toEqual(row);
      expect(sameSnapshot(read.roots, view.roots)).toBe(true);
    }
    expect(registry.rowOf('/srv/workspace-9').row).toBeUndefined();
    // A row is found by its exact root, not by an overlapping one.
    expect(registry.rowOf('/srv').row).toBeUndefined();
    expect(registry.rowOf('/srv/workspace-0/inner').row).toBeUndefined();
    expect(pathExists(registry.layout.registryLock)).toBe(false);
  });

  it('lets an operation replace its own writes within one transaction, and its writer still proves the lock after each', async () => {
    const { stateHome, registry } = await initialised();
    const workspace = workspaceFolder(registry);
    await registry.transaction(TEST_ROOT, (transaction) => {
      const [first, second] = reservations(stateHome, 2) as [Reservation, Reservation];
      transaction.reserve(first);
      transaction.reserve(second);
      transaction.writer.publishFolder(join(workspace, 'service'), { 'format.json': PUBLISHED });
      transaction.unreserve(first.root, first.epoch);
      transaction.unreserve(second.root, second.epoch);
      const lock = transaction.writer.create(join(workspace, 'checkout.lock'), PUBLISHED);
      transaction.reserve(reservation(stateHome, 7));
      transaction.writer.remove(join(workspace, 'checkout.lock'), lock);
    });
    expect(registry.list().entries.map((entry) => entry.root)).toEqual(['/srv/workspace-7']);
    expect(namesIn(workspace)).toEqual(['service']);
  });

  it('tableUnchanged tells a table still the one read from one a transaction replaced, even with the same rows', async () => {
    const { stateHome, registry } = await initialised();
    const [row] = reservations(stateHome, 1);
    const before = registry.rowOf(row!.root);
    expect(registry.tableUnchanged(before.roots)).toBe(true);
    await registry.transaction(row!.root, (transaction) => transaction.reserve(row!));
    expect(registry.tableUnchanged(before.roots)).toBe(false);
    const reserved = registry.list();
    expect(registry.tableUnchanged(reserved.roots)).toBe(true);
    await registry.transaction(row!.root, (transaction) => {
      transaction.unreserve(row!.root, row!.epoch);
      transaction.reserve(row!);
    });
    expect(registry.list().entries).toEqual(reserved.entries);
    expect(registry.tableUnchanged(reserved.roots)).toBe(false);
    expect(new Registry(join(stateHome, 'nowhere')).tableUnchanged(undefined)).toBe(true);
  });

  it('readers never look at the lock: list and rowOf answer while a transaction holds it, which names this process and its root', async () => {
    const { stateHome, registry } = await initialised();
    const existing = reservations(stateHome, 2);
    await registry.transaction(TEST_ROOT, (transaction) => existing.forEach((row) => transaction.reserve(row)));
    const before = registry.list();
    const reader = new Registry(stateHome);
    await registry.transaction('/srv/workspace-5', async (transaction) => {
      await Promise.resolve();
      for (const view of [registry.list(), reader.list()]) {
        expect(view.entries).toEqual(existing);
        expect(sameSnapshot(view.roots, before.roots)).toBe(true);
      }
      expect(reader.rowOf('/srv/workspace-1').row).toEqual(existing[1]);
      expect(reader.rowOf('/srv/workspace-5').row).toBeUndefined();
      const state = registry.readLock();
      expect(state?.path).toBe(registry.layout.registryLock);
      expect(state?.lock).toEqual({
        schema: 'leasehold.registry-lock/1',
        token: state?.lock.token,
        pid: process.pid,
        host: hostname(),
        processStart: myProcessStart(),
        root: '/srv/workspace-5',
      });
      expect(state?.verdict).toBe('live');
      expect(modeOf(registry.layout.registryLock)).toBe(0o600);
      expect(
        await codeOfAsync(() =>
          transaction.writer.publishFolder(join(workspaceFolder(registry), 'service'), { 'format.json': PUBLISHED }),
        ),
      ).toBe('no error');
    });
    expect(registry.readLock()).toBeUndefined();
    expect(registry.readMarkers()).toEqual([]);
  });

  it('a changed table is a new snapshot, even when it holds identical bytes again', async () => {
    const { stateHome, registry } = await initialised();
    const row = reservation(stateHome, 1);
    const before = registry.rowOf(row.root);
    await registry.transaction(row.root, (transaction) => transaction.reserve(row));
    const reserved = registry.rowOf(row.root);
    expect(reserved.row).toEqual(row);
    expect(sameSnapshot(reserved.roots, before.roots)).toBe(false);
    await registry.transaction(row.root, (transaction) => transaction.unreserve(row.root, row.epoch));
    const after = registry.rowOf(row.root);
    expect(after.row).toBeUndefined();
    expect(after.roots?.identity).toBe(before.roots?.identity);
    expect(sameSnapshot(after.roots, before.roots)).toBe(false);
  });

  it('the writer and reserve are conflict once roots.json moved under the transaction, which then keeps no lock', async () => {
    const { stateHome, registry } = await initialised();
    const foreign = encode({ schema: 'leasehold.registry/1', entries: [] });
    let held = 'not run';
    const code = await codeOfAsync(
      registry.transaction(TEST_ROOT, async (transaction) => {
        // Something that is not a registry writer changed the file: the snapshot no longer holds.
        writePrivateFile(registry.layout.roots, foreign);
        held = await codeOfAsync(() =>
          transaction.writer.publishFolder(join(workspaceFolder(registry), 'service'), { 'format.json': PUBLISHED }),
        );
        transaction.reserve(reservation(stateHome, 1));
      }),
    );
    expect(held).toBe('conflict');
    expect(code).toBe('conflict');
    expect(bytesOf(registry.layout.roots)).toBe(Buffer.from(foreign).toString('hex'));
    expect(pathExists(registry.layout.workspaces)).toBe(false);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
  });

  it('the writer and reserve are conflict once the lock is no longer ours; the other lock is left in place', async () => {
    const { stateHome, registry } = await initialised();
    const roots = bytesOf(registry.layout.roots);
    let foreign: RegistryLock | undefined;
    let held = 'not run';
    const code = await codeOfAsync(
      registry.transaction(TEST_ROOT, async (transaction) => {
        foreign = writeLock(registry, { root: '/srv/other' });
        held = await codeOfAsync(() =>
          transaction.writer.publishFolder(join(workspaceFolder(registry), 'service'), { 'format.json': PUBLISHED }),
        );
        transaction.reserve(reservation(stateHome, 1));
      }),
    );
    expect(held).toBe('conflict');
    expect(code).toBe('conflict');
    expect(bytesOf(registry.layout.roots)).toBe(roots);
    expect(pathExists(registry.layout.workspaces)).toBe(false);
    // Removal is a compare-and-swap too: the lock that is not ours stays.
    expect(decodeLock(registry.layout.registryLock)).toEqual(foreign);
  });
});

describe('the transaction writer', () => {
  /** Each write of the writer, on a workspace folder prepared so that the write succeeds while the lock is held. */
  const writes: [string, (registry: Registry) => (writer: GuardedWriter) => void][] = [
    [
      'create',
      (registry) => {
        mkdirSync(workspaceFolder(registry), { recursive: true, mode: 0o700 });
        return (writer) => writer.create(join(workspaceFolder(registry), 'checkout.lock'), PUBLISHED);
      },
    ],
    [
      'remove',
      (registry) => {
        const path = join(workspaceFolder(registry), 'checkout.lock');
        const snapshot = writtenByHand(registry, path, PUBLISHED);
        return (writer) => writer.remove(path, snapshot);
      },
    ],
    [
      'publishFolder, with the folders above it',
      (registry) => (writer) =>
        writer.publishFolder(join(workspaceFolder(registry), 'service'), { 'format.json': PUBLISHED }),
    ],
    [
      'removeFolder',
      (registry) => {
        const folder = join(workspaceFolder(registry), 'service');
        const snapshot = writtenByHand(registry, join(folder, 'format.json'), PUBLISHED);
        return (writer) => writer.removeFolder(folder, { 'format.json': snapshot });
      },
    ],
  ];

  it.each(writes)('%s writes while the transaction holds the lock', async (_name, prepare) => {
    const { registry } = await initialised();
    const write = prepare(registry);
    const before = filesUnder(registry.layout.workspaces);
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, (transaction) => write(transaction.writer)))).toBe(
      'no error',
    );
    expect(filesUnder(registry.layout.workspaces)).not.toEqual(before);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
  });

  it.each(writes)(
    '%s proves the lock first: once it is no longer ours, conflict with nothing written, the other lock left',
    async (_name, prepare) => {
      const { registry } = await initialised();
      const write = prepare(registry);
      const before = filesUnder(registry.layout.workspaces);
      let foreign: RegistryLock | undefined;
      const code = await codeOfAsync(
        registry.transaction(TEST_ROOT, (transaction) => {
          foreign = writeLock(registry, { root: '/srv/other' });
          write(transaction.writer);
        }),
      );
      expect(code).toBe('conflict');
      expect(filesUnder(registry.layout.workspaces)).toEqual(before);
      expect(namesIn(registry.layout.staging)).toEqual([]);
      expect(decodeLock(registry.layout.registryLock)).toEqual(foreign);
    },
  );

  it.each(writes)(
    '%s proves the table first: once roots.json moved, conflict with nothing written',
    async (_name, prepare) => {
      const { registry } = await initialised();
      const write = prepare(registry);
      const before = filesUnder(registry.layout.workspaces);
      const code = await codeOfAsync(
        registry.transaction(TEST_ROOT, (transaction) => {
          writePrivateFile(registry.layout.roots, encode({ schema: 'leasehold.registry/1', entries: [] }));
          write(transaction.writer);
        }),
      );
      expect(code).toBe('conflict');
      expect(filesUnder(registry.layout.workspaces)).toEqual(before);
      expect(namesIn(registry.layout.staging)).toEqual([]);
      expect(pathExists(registry.layout.registryLock)).toBe(false);
    },
  );
});

describe('initialisation states', () => {
  it('completes an interrupted initialisation (format alone): roots.json is recreated with no entries', async () => {
    const { registry } = await initialised();
    const format = bytesOf(registry.layout.registryFormat);
    rmSync(registry.layout.roots);
    const view = registry.list();
    expect(view.entries).toEqual([]);
    expect(view.roots).toBeUndefined();
    expect(view.format).toBeDefined();
    const inside = await registry.transaction(TEST_ROOT, (transaction) => transaction.entries);
    expect(inside).toEqual([]);
    expect(
      decodeBytes(reservationTableSchema, readFileSync(registry.layout.roots), REGISTRY_BYTES, 'roots.json'),
    ).toEqual({
      schema: 'leasehold.registry/1',
      entries: [],
    });
    expect(bytesOf(registry.layout.registryFormat)).toBe(format);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    expect(await codeOfAsync(() => registry.list())).toBe('no error');
  });

  it('refuses roots.json without format.json, in list, rowOf and a transaction, and keeps no lock', async () => {
    const { stateHome, registry } = await initialised();
    await registry.transaction(TEST_ROOT, (transaction) => transaction.reserve(reservation(stateHome, 1)));
    const roots = bytesOf(registry.layout.roots);
    rmSync(registry.layout.registryFormat);
    expect(await codeOfAsync(() => registry.list())).toBe('refused');
    expect(await codeOfAsync(() => registry.rowOf('/srv/workspace-1'))).toBe('refused');
    expect(await failedTransaction(registry, TEST_ROOT)).toEqual({ code: 'refused', ran: false });
    expect(bytesOf(registry.layout.roots)).toBe(roots);
    expect(pathExists(registry.layout.registryFormat)).toBe(false);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('refused');
  });

  it('refuses a format.json of another state home, in list and in a transaction', async () => {
    const { registry } = await initialised();
    writePrivateFile(
      registry.layout.registryFormat,
      encode({ schema: 'leasehold.registry-format/1', stateHome: '/elsewhere' }),
    );
    expect(await codeOfAsync(() => registry.list())).toBe('refused');
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('refused');
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    // Format alone of another state home is not completed either.
    rmSync(registry.layout.roots);
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('refused');
    expect(pathExists(registry.layout.roots)).toBe(false);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
  });
});

describe('the state home, checked by readers', () => {
  it('a state home with group or other bits (0755) is refused by checkStateHome, list, rowOf and a transaction', async () => {
    const { stateHome, registry } = await initialised();
    const before = stateOf(registry);
    chmodSync(stateHome, 0o755);
    expect(await codeOfAsync(() => registry.checkStateHome())).toBe('refused');
    expect(await codeOfAsync(() => registry.list())).toBe('refused');
    expect(await codeOfAsync(() => registry.rowOf('/srv/workspace-1'))).toBe('refused');
    expect(await codeOfAsync(() => new Registry(stateHome).list())).toBe('refused');
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('refused');
    expect(stateOf(registry)).toEqual(before);
    expect(modeOf(stateHome)).toBe(0o755);
    chmodSync(stateHome, 0o700);
    expect(await codeOfAsync(() => registry.list())).toBe('no error');
  });

  it('a state home replaced by a symbolic link (to a safe copy) is refused by list, rowOf and a transaction', async () => {
    const { stateHome, registry } = await initialised();
    await registry.transaction(TEST_ROOT, (transaction) => transaction.reserve(reservation(stateHome, 1)));
    const real = `${stateHome}-real`;
    renameSync(stateHome, real);
    symlinkSync(real, stateHome);
    expect(await codeOfAsync(() => registry.checkStateHome())).toBe('refused');
    expect(await codeOfAsync(() => registry.list())).toBe('refused');
    expect(await codeOfAsync(() => registry.rowOf('/srv/workspace-1'))).toBe('refused');
    const roots = bytesOf(join(real, NAMESPACE_FOLDER, 'registry', 'roots.json'));
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('refused');
    expect(bytesOf(join(real, NAMESPACE_FOLDER, 'registry', 'roots.json'))).toBe(roots);
    expect(pathExists(join(real, NAMESPACE_FOLDER, 'registry', 'registry.lock'))).toBe(false);
  });

  it('a registry folder with group or other bits is refused by readers', async () => {
    const { registry } = await initialised();
    chmodSync(registry.layout.registry, 0o750);
    expect(await codeOfAsync(() => registry.list())).toBe('refused');
    expect(await codeOfAsync(() => registry.rowOf('/srv/a'))).toBe('refused');
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('refused');
  });
});

describe('the names in the registry folder', () => {
  it('REGISTRY_FOLDER_ENTRIES is the three files and the take-over marker pattern', () => {
    expect(REGISTRY_FOLDER_ENTRIES).toEqual(['format.json', 'roots.json', 'registry.lock', TAKEOVER_MARKER]);
    const token = randomUUID();
    expect(TAKEOVER_MARKER.test(`takeover-${token}.lock`)).toBe(true);
    expect(TAKEOVER_MARKER.test(`takeover-${token.toUpperCase()}.lock`)).toBe(false);
    expect(TAKEOVER_MARKER.test(`takeover-${token}.lock.tmp`)).toBe(false);
    expect(TAKEOVER_MARKER.test(`xtakeover-${token}.lock`)).toBe(false);
    expect(TAKEOVER_MARKER.test('takeover-.lock')).toBe(false);
  });

  it('admits a take-over marker: readers answer, readMarkers reports it, and the next holder removes it', async () => {
    const { stateHome, registry } = await initialised();
    await registry.transaction(TEST_ROOT, (transaction) => transaction.reserve(reservation(stateHome, 1)));
    // A marker a writer of another boot left (absent holder), for a lock that is gone.
    const marker = lockDocument({ processStart: withChangedField(myProcessStart(), 1) });
    const path = markerPath(registry, randomUUID());
    writePrivateFile(path, encode(marker));
    expect(registry.list().entries.map((entry) => entry.root)).toEqual(['/srv/workspace-1']);
    expect(registry.rowOf('/srv/workspace-1').row?.root).toBe('/srv/workspace-1');
    const markers = registry.readMarkers();
    expect(markers.map(({ path: found, lock, verdict }) => ({ found, lock, verdict }))).toEqual([
      { found: path, lock: marker, verdict: 'absent' },
    ]);
    expect(registry.readLock()).toBeUndefined();
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('no error');
    expect(pathExists(path)).toBe(false);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
  });

  // A fixed token, so that the test names are the same from one run to the next.
  const token = '0b7e4a52-9c1d-4f3e-8a6b-2d5c7e9f1a3b';
  it.each([
    'notes.txt',
    `takeover-${token.toUpperCase()}.lock`,
    `takeover-${token}.lock.tmp`,
    `takeover-${token}`,
    'takeover-.lock',
    'registry.lock.old',
    'roots.json.bak',
  ])('refuses the stray name %s, in list, rowOf and a transaction, writing nothing', async (name) => {
    const { registry } = await initialised();
    writePrivateFile(join(registry.layout.registry, name), encode(lockDocument()));
    const before = stateOf(registry);
    expect(await codeOfAsync(() => registry.list())).toBe('refused');
    expect(await codeOfAsync(() => registry.rowOf('/srv/a'))).toBe('refused');
    expect(await codeOfAsync(() => registry.readMarkers())).toBe('refused');
    expect(await failedTransaction(registry, TEST_ROOT)).toEqual({ code: 'refused', ran: false });
    expect(stateOf(registry)).toEqual(before);
  });
});

describe('failure semantics', () => {
  it('rethrows an error thrown before any write and removes the lock', async () => {
    const { registry } = await initialised();
    const roots = bytesOf(registry.layout.roots);
    const thrown = new ContractError('unavailable', 'the operation gave up');
    const attempt = registry.transaction(TEST_ROOT, () => {
      throw thrown;
    });
    await expect(attempt).rejects.toBe(thrown);
    expect(await codeOfAsync(attempt)).toBe('unavailable');
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    expect(bytesOf(registry.layout.roots)).toBe(roots);
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('no error');
  });

  it('rethrows an async rejection before any write and removes the lock', async () => {
    const { registry } = await initialised();
    const thrown = new ContractError('conflict', 'rejected later');
    const attempt = registry.transaction(TEST_ROOT, async () => {
      await Promise.resolve();
      throw thrown;
    });
    await expect(attempt).rejects.toBe(thrown);
    expect(await codeOfAsync(attempt)).toBe('conflict');
    expect(pathExists(registry.layout.registryLock)).toBe(false);
  });

  it('removes the lock after a failure that follows a write too; the table stays whole, as written', async () => {
    const { stateHome, registry } = await initialised();
    const written = reservation(stateHome, 1);
    const thrown = new ContractError('unavailable', 'failed after the write');
    const attempt = registry.transaction(written.root, (transaction) => {
      transaction.reserve(written);
      throw thrown;
    });
    await expect(attempt).rejects.toBe(thrown);
    expect(await codeOfAsync(attempt)).toBe('unavailable');
    // No lock is left: the write happened, and its row fences its root by itself.
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    expect(registry.readLock()).toBeUndefined();
    expect(registry.list().entries).toEqual([written]);
    expect(
      decodeBytes(reservationTableSchema, readFileSync(registry.layout.roots), REGISTRY_BYTES, 'roots.json').entries,
    ).toEqual([written]);
    // Nobody waits on it: a writer with a long wait bound, and this one, go ahead.
    const other = reservation(stateHome, 2);
    await new Registry(stateHome, { lockWaitMs: 60_000 }).transaction(other.root, (transaction) =>
      transaction.reserve(other),
    );
    await registry.transaction(written.root, (transaction) => transaction.unreserve(written.root, written.epoch));
    expect(registry.list().entries).toEqual([other]);
    expect(namesIn(registry.layout.staging)).toEqual([]);
  });

  it('removes the lock when an operation fails after completing an interrupted initialisation (a write)', async () => {
    const { registry } = await initialised();
    rmSync(registry.layout.roots);
    const thrown = new Error('after initialisation');
    await expect(
      registry.transaction(TEST_ROOT, () => {
        throw thrown;
      }),
    ).rejects.toBe(thrown);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    expect(
      decodeBytes(reservationTableSchema, readFileSync(registry.layout.roots), REGISTRY_BYTES, 'roots.json').entries,
    ).toEqual([]);
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('no error');
  });

  it('uses a default lock wait of two seconds', () => {
    expect(DEFAULT_LOCK_WAIT_MS).toBe(2000);
  });
});

describe('locks left by hand', () => {
  /** A transaction that reserves one row and reports what it saw of the lock while it held it. */
  async function takesOver(registry: Registry, stateHome: string, found: RegistryLock): Promise<void> {
    const existing = registry.list().entries;
    const row = reservation(stateHome, 3);
    const seen = await registry.transaction(row.root, (transaction) => {
      transaction.reserve(row);
      return registry.readLock()?.lock;
    });
    expect(seen).toMatchObject({ pid: process.pid, host: hostname(), root: row.root });
    expect(seen?.token).not.toBe(found.token);
    expect(registry.list().entries).toEqual([...existing, row]);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    expect(namesIn(registry.layout.staging)).toEqual([]);
  }

  it('a lock naming this pid with another process start time is absent: taken over', async () => {
    const { stateHome, registry } = await initialised();
    await registry.transaction(TEST_ROOT, (transaction) => transaction.reserve(reservation(stateHome, 1)));
    const processStart = withChangedField(myProcessStart(), 3);
    const lock = writeLock(registry, { processStart });
    expect(ownerStatus(process.pid, hostname(), processStart)).toBe('absent');
    expect(registry.readLock()?.verdict).toBe('absent');
    await takesOver(registry, stateHome, lock);
  });

  it('a lock of another boot is absent: taken over', async () => {
    const { stateHome, registry } = await initialised();
    const lock = writeLock(registry, { processStart: withChangedField(myProcessStart(), 1) });
    expect(registry.readLock()?.verdict).toBe('absent');
    await takesOver(registry, stateHome, lock);
  });

  it('a lock without processStart naming a reaped process is absent: taken over', async () => {
    const { stateHome, registry } = await initialised();
    const child = spawnChild('-e', ['']);
    expect((await child.closed).code).toBe(0);
    const withoutStart: RegistryLock = lockDocument({ pid: child.pid });
    delete withoutStart.processStart;
    writePrivateFile(registry.layout.registryLock, encode(withoutStart));
    expect(registry.readLock()?.verdict).toBe('absent');
    await takesOver(registry, stateHome, withoutStart);
  });

  it.each([
    ['another PID namespace', () => ({ processStart: withChangedField(myProcessStart(), 2) })],
    ['another host', () => ({ host: `${hostname()}-elsewhere` })],
  ])('a lock of %s is ambiguous: quarantine, naming it, with nothing written, again and again', async (_, fields) => {
    const { stateHome, registry } = await initialised();
    await registry.transaction(TEST_ROOT, (transaction) => transaction.reserve(reservation(stateHome, 1)));
    const lock = writeLock(registry, fields());
    expect(ownerStatus(lock.pid, lock.host, lock.processStart)).toBe('ambiguous');
    expect(registry.readLock()?.verdict).toBe('ambiguous');
    const before = stateOf(registry);
    let ran = false;
    const operation = () => {
      ran = true;
    };
    for (const writer of [registry, new Registry(stateHome, { lockWaitMs: 60_000 })]) {
      const attempt = writer.transaction('/srv/workspace-2', operation);
      expect(await codeOfAsync(attempt)).toBe('quarantine');
      const refusal = (await attempt.catch((error: unknown) => error)) as ContractError;
      expect(refusal.path).toBe(registry.layout.registryLock);
      const { message } = refusal;
      expect(message).toContain(registry.layout.registryLock);
      expect(message).toContain(`pid ${lock.pid}`);
      expect(message).toContain(lock.host);
      expect(message).toContain('cannot be told live or gone from here');
      // The message says what is wrong; the remedy, what a person runs.
      expect(message).not.toContain('leasehold');
      expect(refusal.remedy).toBe(
        `no writer may pass that lock until a person checks its holder is gone: \`leasehold doctor --state-home ${stateHome}\` shows what to check and the command that clears it`,
      );
    }
    expect(ran).toBe(false);
    expect(stateOf(registry)).toEqual(before);
    // Readers are not held up by it.
    expect(registry.list().entries.map((entry) => entry.root)).toEqual(['/srv/workspace-1']);
  });

  it('a dead lock whose take-over marker names an ambiguous holder: quarantine, naming the marker, nothing written', async () => {
    const { registry } = await initialised();
    const dead = writeLock(registry, { processStart: withChangedField(myProcessStart(), 3) });
    const marker = lockDocument({ host: `${hostname()}-elsewhere` });
    writePrivateFile(markerPath(registry, dead.token), encode(marker));
    const before = stateOf(registry);
    const attempt = registry.transaction(TEST_ROOT, () => undefined);
    expect(await codeOfAsync(attempt)).toBe('quarantine');
    const refusal = (await attempt.catch((error: unknown) => error)) as ContractError;
    expect(refusal.message).toContain(markerPath(registry, dead.token));
    expect(refusal.path).toBe(markerPath(registry, dead.token));
    expect(stateOf(registry)).toEqual(before);
    expect(registry.readMarkers().map((found) => found.verdict)).toEqual(['ambiguous']);
  });

  it('a live lock (this process, no failed removal of its own) is a short hold: busy after the wait, and it stays', async () => {
    const { stateHome, registry } = await initialised();
    writeLock(registry, {});
    expect(registry.readLock()?.verdict).toBe('live');
    const before = stateOf(registry);
    let ran = false;
    const attempt = new Registry(stateHome, { lockWaitMs: 50 }).transaction(TEST_ROOT, () => {
      ran = true;
    });
    await expect(attempt).rejects.toMatchObject({
      code: 'busy',
      remedy: expect.stringContaining('try again in a moment'),
    });
    expect(ran).toBe(false);
    expect(stateOf(registry)).toEqual(before);
  });

  it('a malformed lock is refused, and left in place', async () => {
    const { registry } = await initialised();
    writePrivateFile(registry.layout.registryLock, '{"schema":"leasehold.registry-lock/1"}');
    expect(await codeOfAsync(() => registry.readLock())).toBe('refused');
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('refused');
    expect(bytesOf(registry.layout.registryLock)).toBe(
      Buffer.from('{"schema":"leasehold.registry-lock/1"}').toString('hex'),
    );
  });

  it("a dead holder's lock with a hard link outside staging is refused, never taken over", async () => {
    const { registry } = await initialised();
    writeLock(registry, { processStart: withChangedField(myProcessStart(), 3) });
    linkSync(registry.layout.registryLock, join(dirname(registry.layout.stateHome), 'second-link'));
    const before = stateOf(registry);
    expect(await codeOfAsync(() => registry.readLock())).toBe('refused');
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('refused');
    expect(stateOf(registry)).toEqual(before);
  });
});

describe('the order of mutations', () => {
  function recording(stateHome: string, steps: MutationStep[]): Registry {
    return new Registry(stateHome, {
      hooks: {
        beforeMutation(step) {
          steps.push({ operation: step.operation, action: step.action, path: step.path });
        },
      },
    });
  }

  it('creates registry.lock first, then replaces roots.json, then removes registry.lock last', async () => {
    const { stateHome } = await initialised();
    const steps: MutationStep[] = [];
    const hooked = recording(stateHome, steps);
    const write = (transaction: RegistryTransaction) => transaction.reserve(reservation(stateHome, 1));
    expect(await codeOfAsync(hooked.transaction('/srv/workspace-1', write))).toBe('no error');
    const inStaging = (path: string) => path.startsWith(`${hooked.layout.staging}/`);
    // Operations in order, runs collapsed: create (the lock), replace (roots), remove (the lock).
    const operations = steps
      .map((step) => step.operation)
      .filter((operation, index, all) => all[index - 1] !== operation);
    expect(operations).toEqual(['create', 'replace', 'remove']);
    const create = steps.filter((step) => step.operation === 'create');
    const replace = steps.filter((step) => step.operation === 'replace');
    const remove = steps.filter((step) => step.operation === 'remove');
    // create: staged temp written and fsynced, linked to registry.lock, temp unlinked; no folder fsync of its own (LOCK_PUBLISH).
    expect(create.map((step) => step.action)).toEqual(['write', 'fsync', 'link', 'unlink']);
    expect(create.find((step) => step.action === 'link')?.path).toBe(hooked.layout.registryLock);
    expect(create.filter((step) => step.action !== 'link').every((step) => inStaging(step.path))).toBe(true);
    // replace: staged temp, renamed over roots.json, folder fsynced: this fsync makes the lock's link durable too.
    expect(replace.map((step) => step.action)).toEqual(['write', 'fsync', 'rename', 'fsync-directory']);
    expect(replace.find((step) => step.action === 'rename')?.path).toBe(hooked.layout.roots);
    expect(replace.at(-1)?.path).toBe(hooked.layout.registry);
    // remove: the lock unlinked, no folder fsync; nothing after it.
    expect(remove).toEqual([{ operation: 'remove', action: 'unlink', path: hooked.layout.registryLock }]);
    expect(steps.at(-1)).toEqual({ operation: 'remove', action: 'unlink', path: hooked.layout.registryLock });
    // The registry folder is fsynced once in all: by the table's replace.
    expect(
      steps.filter((step) => step.action === 'fsync-directory' && step.path === hooked.layout.registry),
    ).toHaveLength(1);
    expect(pathExists(hooked.layout.registryLock)).toBe(false);
  });

  it('a take-over: marker created, lock replaced, marker removed, then the table, then the lock removed', async () => {
    const { stateHome, registry } = await initialised();
    const dead = writeLock(registry, { processStart: withChangedField(myProcessStart(), 3) });
    const steps: MutationStep[] = [];
    const hooked = recording(stateHome, steps);
    await hooked.transaction('/srv/workspace-1', (transaction) => transaction.reserve(reservation(stateHome, 1)));
    const place = { base: dirname(stateHome), stateHome };
    const shown = steps.map((step) => shownPath(shownStep({ step }, place, TEST_ROOT), { [dead.token]: '<dead>' }));
    expect(shown).toEqual([
      ...createSteps('state/v1/registry/takeover-<dead>.lock'),
      ...replaceSteps('state/v1/registry/registry.lock'),
      ...removeSteps('state/v1/registry/takeover-<dead>.lock'),
      ...replaceSteps('state/v1/registry/roots.json'),
      ...lockRemoveSteps('state/v1/registry/registry.lock'),
    ]);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    expect(markersIn(stateHome)).toEqual([]);
  });

  it('an error injected at the rename of roots.json removes the lock and leaves roots.json as it was', async () => {
    const { stateHome, registry } = await initialised();
    const roots = bytesOf(registry.layout.roots);
    const injected = new Error('injected before rename');
    const hooked = new Registry(stateHome, {
      hooks: {
        beforeMutation(step) {
          if (step.operation === 'replace' && step.action === 'rename' && step.path === registry.layout.roots)
            throw injected;
        },
      },
    });
    await expect(
      hooked.transaction('/srv/workspace-1', (transaction) => transaction.reserve(reservation(stateHome, 1))),
    ).rejects.toBe(injected);
    expect(bytesOf(registry.layout.roots)).toBe(roots);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('no error');
    // The failed writer's staged temp was discarded.
    expect(namesIn(registry.layout.staging)).toEqual([]);
  });

  it('an error injected while creating the lock leaves no lock and nothing written', async () => {
    const { stateHome, registry } = await initialised();
    const roots = bytesOf(registry.layout.roots);
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
      hooked.transaction(TEST_ROOT, () => {
        ran = true;
      }),
    ).rejects.toBe(injected);
    expect(ran).toBe(false);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    expect(bytesOf(registry.layout.roots)).toBe(roots);
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('no error');
  });
});
