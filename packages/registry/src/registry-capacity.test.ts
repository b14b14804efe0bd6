import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  REGISTRY_BYTES,
  REGISTRY_ENTRIES,
  decodeBytes,
  encode,
  reservationSchema,
  reservationTableSchema,
  type Reservation,
  placeOptions,
  recoverRemedy,
} from '@leasehold/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, codeOf, codeOfAsync, namesIn, pathExists } from '@leasehold/test-utils';
import {
  TEST_ROOT,
  bytesOf,
  initialised,
  makeStateHome,
  myProcessStart,
  reservation,
  reservations,
  withChangedField,
  writePrivateFile,
} from '../test/helpers.js';
import { Registry } from './index.js';
import { checkedRow, encodeTable, validateEntries } from './registry-view.js';

afterEach(cleanUp);

/** A registry on a fresh state home whose roots.json holds `rows`, reserved through the API in one transaction. */
async function registryWith(
  rows: (stateHome: string) => readonly Reservation[],
): Promise<{ stateHome: string; registry: Registry }> {
  const { stateHome, registry } = await initialised();
  const initial = rows(stateHome);
  if (initial.length > 0)
    await registry.transaction(TEST_ROOT, (transaction) => initial.forEach((row) => transaction.reserve(row)));
  return { stateHome, registry };
}

/**
 * Runs a transaction for `row.root` that tries `admit`, then `reserve`, and
 * answers the code of each; asserts that nothing was written: roots.json has
 * the same bytes, no lock and no staging leftover.
 */
async function refusedReserve(registry: Registry, row: Reservation): Promise<{ admit: string; reserve: string }> {
  const before = bytesOf(registry.layout.roots);
  let admit = 'not run';
  const reserve = await codeOfAsync(
    registry.transaction(TEST_ROOT, (transaction) => {
      admit = codeOf(() => transaction.admit(row));
      transaction.reserve(row);
    }),
  );
  expect(bytesOf(registry.layout.roots)).toBe(before);
  expect(pathExists(registry.layout.registryLock)).toBe(false);
  expect(namesIn(registry.layout.staging)).toEqual([]);
  return { admit, reserve };
}

function rootsOnDisk(registry: Registry): Reservation[] {
  return decodeBytes(reservationTableSchema, readFileSync(registry.layout.roots), REGISTRY_BYTES, 'roots.json').entries;
}

// A control character is 1 UTF-16 unit (so a root of it stays within 4096
// characters) but 6 bytes in JSON (`\u0001`): 4090 of them per root make an
// entry of ~24.8 KB, and 200 entries (well within REGISTRY_ENTRIES) ~4.9 MB,
// over REGISTRY_BYTES (4 MiB). Plain ASCII roots of 4096 characters would give
// at most ~256 x 4.6 KB = 1.2 MB, which can never pass the byte bound.
const WIDE_SEGMENT = '\u0001'.repeat(4090);

function wideEntry(stateHome: string, index: number): Reservation {
  return reservation(stateHome, index, { root: `/${index}${WIDE_SEGMENT}` });
}

function wideEntries(stateHome: string, count: number): Reservation[] {
  return Array.from({ length: count }, (_, index) => wideEntry(stateHome, index));
}

function encodedBytes(entries: readonly Reservation[]): number {
  return encode({ schema: 'leasehold.registry/1', entries }).byteLength;
}

describe('capacity by entries', () => {
  it(`accepts exactly ${REGISTRY_ENTRIES} rows`, async () => {
    const { stateHome, registry } = await registryWith((stateHome) => reservations(stateHome, REGISTRY_ENTRIES));
    const full = registry.list().entries;
    expect(full).toHaveLength(REGISTRY_ENTRIES);
    expect(rootsOnDisk(registry)).toEqual(full);
    const seen = await new Registry(stateHome).transaction(TEST_ROOT, (transaction) => transaction.entries);
    expect(seen).toEqual(full);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
  });

  it(`refuses row ${REGISTRY_ENTRIES + 1} with capacity, in admit and reserve, writing nothing`, async () => {
    const { stateHome, registry } = await registryWith((stateHome) => reservations(stateHome, REGISTRY_ENTRIES));
    const full = registry.list().entries;
    expect(await codeOfAsync(() => encodeTable(reservations(stateHome, REGISTRY_ENTRIES + 1), 'roots.json'))).toBe(
      'capacity',
    );
    expect(await refusedReserve(registry, reservation(stateHome, REGISTRY_ENTRIES))).toEqual({
      admit: 'capacity',
      reserve: 'capacity',
    });
    expect(registry.list().entries).toEqual(full);
  });

  it.each([
    ['an equal root', { root: '/srv/workspace-7' }],
    ['an ancestor root', { root: '/srv' }],
    ['a descendant root', { root: '/srv/workspace-7/inner' }],
    ['the same endpoint', { endpoint: 'http://127.0.0.1:10007' }],
  ])('on a full table, refuses %s with conflict before capacity, writing nothing', async (_, overrides) => {
    const { stateHome, registry } = await registryWith((stateHome) => reservations(stateHome, REGISTRY_ENTRIES));
    expect(await refusedReserve(registry, reservation(stateHome, 999, overrides))).toEqual({
      admit: 'conflict',
      reserve: 'conflict',
    });
    expect(registry.list().entries).toHaveLength(REGISTRY_ENTRIES);
  });

  it('admits a row again once one was removed from a full table', async () => {
    const { stateHome, registry } = await registryWith((stateHome) => reservations(stateHome, REGISTRY_ENTRIES));
    const [first] = registry.list().entries as [Reservation];
    const next = reservation(stateHome, REGISTRY_ENTRIES);
    await registry.transaction(next.root, (transaction) => {
      transaction.unreserve(first.root, first.epoch);
      transaction.reserve(next);
    });
    const entries = registry.list().entries;
    expect(entries).toHaveLength(REGISTRY_ENTRIES);
    expect(entries.at(-1)).toEqual(next);
    expect(entries.some((entry) => entry.root === first.root)).toBe(false);
  });
});

describe('capacity by bytes', () => {
  it('refuses, with capacity and nothing written, a list within REGISTRY_ENTRIES whose encoding passes REGISTRY_BYTES', () => {
    const stateHome = makeStateHome();
    const wide = wideEntries(stateHome, 200);
    // Every entry is a valid reservation, and the list is valid: only its size is wrong.
    for (const entry of wide) expect(reservationSchema.safeParse(entry).success).toBe(true);
    expect(codeOf(() => validateEntries(wide, stateHome, 'roots.json'))).toBe('no error');
    expect(wide.length).toBeLessThanOrEqual(REGISTRY_ENTRIES);
    expect(encodedBytes(wide)).toBeGreaterThan(REGISTRY_BYTES);
    expect(codeOf(() => encodeTable(wide, 'roots.json'))).toBe('capacity');
  });

  it('reserve refuses a row that would take roots.json past REGISTRY_BYTES (capacity, nothing written), and admits one that fits', async () => {
    const { stateHome, registry } = await initialised();
    const narrow = reservation(stateHome, 900);
    // The most wide rows that still leave room for one narrow row.
    let count = 160;
    while (encodedBytes([...wideEntries(stateHome, count + 1), narrow]) <= REGISTRY_BYTES) count += 1;
    const table = wideEntries(stateHome, count);
    expect(encodedBytes([...table, narrow])).toBeLessThanOrEqual(REGISTRY_BYTES);
    expect(encodedBytes([...table, wideEntry(stateHome, count)])).toBeGreaterThan(REGISTRY_BYTES);
    expect(count).toBeLessThan(REGISTRY_ENTRIES);
    // The table is written by hand (reserving ~170 rows of ~25 KB each would rewrite ~700 MB).
    writePrivateFile(registry.layout.roots, encode({ schema: 'leasehold.registry/1', entries: table }));
    expect(registry.list().entries).toEqual(table);

    expect(await refusedReserve(registry, wideEntry(stateHome, count))).toEqual({
      admit: 'capacity',
      reserve: 'capacity',
    });
    // An overlap is refused first, even for a row that would not fit.
    const overlapping = reservation(stateHome, count, { root: table[0]!.root });
    expect(encodedBytes([...table, overlapping])).toBeGreaterThan(REGISTRY_BYTES);
    expect(await refusedReserve(registry, overlapping)).toEqual({ admit: 'conflict', reserve: 'conflict' });
    expect(registry.list().entries).toEqual(table);

    await registry.transaction(narrow.root, (transaction) => transaction.reserve(narrow));
    expect(registry.list().entries).toEqual([...table, narrow]);
    expect(rootsOnDisk(registry)).toEqual([...table, narrow]);
    expect(bytesOf(registry.layout.roots)!.length / 2).toBeLessThanOrEqual(REGISTRY_BYTES);
  });

  it('encodes exactly the canonical document it accepts', () => {
    const stateHome = makeStateHome();
    const entries = reservations(stateHome, 3);
    expect(Buffer.from(encodeTable(entries, 'roots.json')).toString('hex')).toBe(
      Buffer.from(encode({ schema: 'leasehold.registry/1', entries })).toString('hex'),
    );
    expect(encodeTable([], 'roots.json').byteLength).toBeGreaterThan(0);
  });
});

describe('reserve refusals', () => {
  const existing = (stateHome: string) =>
    reservation(stateHome, 40, { root: '/srv/a', endpoint: 'http://127.0.0.1:8080' });
  const cases: [string, (stateHome: string) => Reservation, string][] = [
    ['a descendant root', (stateHome) => reservation(stateHome, 1, { root: '/srv/a/b' }), 'conflict'],
    ['an ancestor root', (stateHome) => reservation(stateHome, 1, { root: '/srv' }), 'conflict'],
    ['the root folder', (stateHome) => reservation(stateHome, 1, { root: '/' }), 'conflict'],
    ['an equal root', (stateHome) => reservation(stateHome, 1, { root: '/srv/a' }), 'conflict'],
    ['the same endpoint', (stateHome) => reservation(stateHome, 1, { endpoint: 'http://127.0.0.1:8080' }), 'conflict'],
    ['a row of another state home', () => reservation('/elsewhere/state', 2), 'refused'],
    ['a relative root', (stateHome) => reservation(stateHome, 1, { root: 'srv/b' }), 'refused'],
    ['an unnormalised root', (stateHome) => reservation(stateHome, 1, { root: '/srv/b/../c' }), 'refused'],
    ['a root with a trailing slash', (stateHome) => reservation(stateHome, 1, { root: '/srv/b/' }), 'refused'],
    [
      'an uppercase epoch',
      (stateHome) => reservation(stateHome, 1, { epoch: 'AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA' }),
      'refused',
    ],
    [
      'an endpoint that is not loopback',
      (stateHome) => reservation(stateHome, 1, { endpoint: 'http://10.0.0.1:80' }),
      'refused',
    ],
  ];

  it.each(cases)('refuses %s (%s) with nothing written', async (_, make, code) => {
    const { stateHome, registry } = await registryWith((stateHome) => [existing(stateHome)]);
    const kept = registry.list().entries;
    const row = make(stateHome);
    // The list with the row added is no valid table either.
    expect(
      codeOf(() => validateEntries([...kept, checkedRow(row, stateHome, 'roots.json')], stateHome, 'roots.json')),
    ).toBe('refused');
    expect((await refusedReserve(registry, row)).reserve).toBe(code);
    expect(registry.list().entries).toEqual(kept);
    expect(kept.map((entry) => entry.root)).toEqual(['/srv/a']);
  });

  // The row in the way is a fence: a live owner's is conflict; one whose process is gone (another boot, a reused
  // pid) or cannot be told from here (another host, another PID namespace) is quarantine, naming it.
  const holders: [string, () => Partial<Reservation>, string, string][] = [
    ['a live process (this one)', () => ({}), 'conflict', 'live'],
    [
      'a process of another boot',
      () => ({ processStart: withChangedField(myProcessStart(), 1) }),
      'quarantine',
      'absent',
    ],
    ['a reused pid', () => ({ processStart: withChangedField(myProcessStart(), 3) }), 'quarantine', 'absent'],
    [
      'another PID namespace',
      () => ({ processStart: withChangedField(myProcessStart(), 2) }),
      'quarantine',
      'ambiguous',
    ],
    ['another host', () => ({ host: 'another-host' }), 'quarantine', 'ambiguous'],
  ];
  for (const [name, holder, code, status] of holders) {
    for (const [what, row] of [
      ['the same root', { root: '/srv/a' }],
      ['an overlapping root', { root: '/srv/a/inner' }],
      ['the same endpoint', { endpoint: 'http://127.0.0.1:8080' }],
    ] as const) {
      it(`refuses ${what} held by ${name} (${code}, naming the holder ${status}) with nothing written`, async () => {
        const { stateHome, registry } = await registryWith((stateHome) => [{ ...existing(stateHome), ...holder() }]);
        const [held] = registry.list().entries;
        const refusal = await registry
          .transaction(TEST_ROOT, (transaction) => transaction.admit(reservation(stateHome, 1, row)))
          .catch((error: unknown) => error);
        expect(refusal).toMatchObject({
          code,
          message: expect.stringContaining(`pid ${held!.pid} on host ${held!.host} (${status})`),
        });
        // The remedy names the workspace in the way (not the one asked for), pasteable.
        const remedy =
          status === 'live'
            ? expect.stringContaining(`\`leasehold status ${placeOptions(held!.root, stateHome)}\``)
            : recoverRemedy(held!.root, stateHome, status as 'absent' | 'ambiguous');
        expect(refusal).toMatchObject({ remedy });
        expect(await refusedReserve(registry, reservation(stateHome, 1, row))).toEqual({ admit: code, reserve: code });
      });
    }
  }

  it('accepts siblings whose names share a prefix (/a/b and /a/bc)', async () => {
    const { stateHome, registry } = await initialised();
    const entries = [reservation(stateHome, 1, { root: '/a/b' }), reservation(stateHome, 2, { root: '/a/bc' })];
    expect(
      await codeOfAsync(
        registry.transaction(TEST_ROOT, (transaction) => entries.forEach((row) => transaction.reserve(row))),
      ),
    ).toBe('no error');
    expect(registry.list().entries).toEqual(entries);
  });
});

describe('unreserve', () => {
  it('removes exactly the row of that root and epoch, keeping the others in order', async () => {
    const { registry } = await registryWith((stateHome) => reservations(stateHome, 4));
    const [first, second, third, fourth] = registry.list().entries as [
      Reservation,
      Reservation,
      Reservation,
      Reservation,
    ];
    await registry.transaction(second.root, (transaction) => {
      transaction.unreserve(second.root, second.epoch);
      expect(transaction.entries).toEqual([first, third, fourth]);
      expect(transaction.rowOf(second.root)).toBeUndefined();
    });
    expect(registry.list().entries).toEqual([first, third, fourth]);
    expect(rootsOnDisk(registry)).toEqual([first, third, fourth]);
  });

  it.each([
    ['the right root with another epoch', (row: Reservation) => ({ root: row.root, epoch: randomUUID() })],
    ['a root that has no row', (row: Reservation) => ({ root: `${row.root}-missing`, epoch: row.epoch })],
    ['an ancestor of the row', () => ({ root: '/srv', epoch: randomUUID() })],
  ])('refuses %s with conflict, writing nothing', async (_, target) => {
    const { registry } = await registryWith((stateHome) => reservations(stateHome, 3));
    const before = registry.list().entries;
    const { root, epoch } = target(before[1]!);
    const roots = bytesOf(registry.layout.roots);
    expect(await codeOfAsync(registry.transaction(root, (transaction) => transaction.unreserve(root, epoch)))).toBe(
      'conflict',
    );
    expect(bytesOf(registry.layout.roots)).toBe(roots);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    expect(namesIn(registry.layout.staging)).toEqual([]);
    expect(registry.list().entries).toEqual(before);
  });

  it('a second unreserve of the same row in one transaction is conflict; the first stands and the lock is removed', async () => {
    const { registry } = await registryWith((stateHome) => reservations(stateHome, 2));
    const [first, second] = registry.list().entries as [Reservation, Reservation];
    const code = await codeOfAsync(
      registry.transaction(first.root, (transaction) => {
        transaction.unreserve(first.root, first.epoch);
        transaction.unreserve(first.root, first.epoch);
      }),
    );
    expect(code).toBe('conflict');
    expect(registry.list().entries).toEqual([second]);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
  });
});
