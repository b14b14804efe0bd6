import { readFileSync } from 'node:fs';
import {
  REGISTRY_BYTES,
  REGISTRY_ENTRIES,
  decodeBytes,
  encode,
  registrySchema,
  reservationSchema,
  type Reservation,
} from '@leasehold/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, codeOfAsync, pathExists } from '@leasehold/test-utils';
import { bytesOf, makeStateHome, reservation, reservations } from '../test/helpers.js';
import { Registry } from './index.js';
import { encodeEntries, validateEntries } from './registry-view.js';

afterEach(cleanUp);

/** An initialised, empty registry on a fresh state home. */
async function registryWith(): Promise<{ stateHome: string; registry: Registry }> {
  return registryWithAt(makeStateHome(), []);
}

/** A registry on `stateHome` holding `initial` entries. */
async function registryWithAt(stateHome: string, initial: readonly Reservation[]): Promise<{ stateHome: string; registry: Registry }> {
  const registry = new Registry(stateHome);
  await registry.transaction(() => undefined);
  if (initial.length > 0) await registry.transaction((transaction) => transaction.writeEntries(initial));
  return { stateHome, registry };
}

/**
 * Runs a transaction that tries to write `entries` and reports the error code,
 * whether the transaction was dirty when it failed, and asserts that nothing
 * was written: roots.json has the same bytes and no lock is left.
 */
async function refusedWrite(registry: Registry, entries: readonly Reservation[]): Promise<{ code: string; dirty: boolean }> {
  const before = bytesOf(registry.rootsPath);
  let dirty: boolean | undefined;
  const code = await codeOfAsync(
    registry.transaction((transaction) => {
      try {
        transaction.writeEntries(entries);
      } finally {
        dirty = transaction.dirty;
      }
    }),
  );
  expect(bytesOf(registry.rootsPath)).toBe(before);
  expect(pathExists(registry.lockPath)).toBe(false);
  expect(registry.peek().locked).toBe(false);
  return { code, dirty: dirty ?? true };
}

// A control character is 1 UTF-16 unit (so a root of it stays within 4096
// characters) but 6 bytes in JSON (`\u0001`): 4090 of them per root make an
// entry of ~24.8 KB, and 200 entries (well within REGISTRY_ENTRIES) ~4.9 MB,
// over REGISTRY_BYTES (4 MiB). Plain ASCII roots of 4096 characters would give
// at most ~256 x 4.6 KB = 1.2 MB, which can never pass the byte bound.
const WIDE_SEGMENT = '\u0001'.repeat(4090);

function wideEntries(stateHome: string, count: number): Reservation[] {
  return Array.from({ length: count }, (_, index) => reservation(stateHome, index, { root: `/${index}${WIDE_SEGMENT}` }));
}

describe('capacity', () => {
  it(`refuses ${REGISTRY_ENTRIES + 1} entries with capacity, writing nothing`, async () => {
    const { stateHome, registry } = await registryWith();
    const tooMany = reservations(stateHome, REGISTRY_ENTRIES + 1);
    expect(await codeOfAsync(() => encodeEntries(tooMany, stateHome, 'roots.json'))).toBe('capacity');
    expect(await refusedWrite(registry, tooMany)).toEqual({ code: 'capacity', dirty: false });
    expect(registry.peek().entries).toEqual([]);
  });

  it(`refuses ${REGISTRY_ENTRIES + 1} entries over an existing non-empty registry, leaving it whole`, async () => {
    const stateHome = makeStateHome();
    const existing = reservations(stateHome, 10);
    const { registry } = await registryWithAt(stateHome, existing);
    const tooMany = reservations(stateHome, REGISTRY_ENTRIES + 1);
    expect(await refusedWrite(registry, tooMany)).toEqual({ code: 'capacity', dirty: false });
    expect(registry.peek().entries).toEqual(existing);
  });

  it(`accepts exactly ${REGISTRY_ENTRIES} entries`, async () => {
    const { stateHome, registry } = await registryWith();
    const full = reservations(stateHome, REGISTRY_ENTRIES);
    expect(await codeOfAsync(registry.transaction((transaction) => transaction.writeEntries(full)))).toBe('no error');
    expect(decodeBytes(registrySchema, readFileSync(registry.rootsPath), REGISTRY_BYTES, 'roots.json').entries).toHaveLength(
      REGISTRY_ENTRIES,
    );
    const seen = await registry.transaction((transaction) => transaction.entries);
    expect(seen).toEqual(full);
    expect(pathExists(registry.lockPath)).toBe(false);
  });

  it('refuses, with capacity and nothing written, a list within REGISTRY_ENTRIES whose encoding passes REGISTRY_BYTES', async () => {
    const { stateHome, registry } = await registryWith();
    const wide = wideEntries(stateHome, 200);
    // Every entry is a valid reservation, and the list is valid: only its size is wrong.
    for (const entry of wide) expect(reservationSchema.safeParse(entry).success).toBe(true);
    expect(await codeOfAsync(() => validateEntries(wide, stateHome, 'roots.json'))).toBe('no error');
    expect(wide.length).toBeLessThanOrEqual(REGISTRY_ENTRIES);
    expect(encode({ schema: 'leasehold.registry/1', entries: wide }).byteLength).toBeGreaterThan(REGISTRY_BYTES);
    expect(await codeOfAsync(() => encodeEntries(wide, stateHome, 'roots.json'))).toBe('capacity');
    expect(await refusedWrite(registry, wide)).toEqual({ code: 'capacity', dirty: false });
    expect(await codeOfAsync(registry.transaction((transaction) => transaction.encodeEntries(wide)))).toBe('capacity');
    expect(pathExists(registry.lockPath)).toBe(false);
  });

  it('accepts a list of wide roots whose encoding stays within REGISTRY_BYTES', async () => {
    const { stateHome, registry } = await registryWith();
    // 160 x ~24.8 KB = ~4.0 MB: under the 4 MiB bound, so the byte bound, not the width, refused above.
    const wide = wideEntries(stateHome, 160);
    expect(encode({ schema: 'leasehold.registry/1', entries: wide }).byteLength).toBeLessThanOrEqual(REGISTRY_BYTES);
    expect(await codeOfAsync(registry.transaction((transaction) => transaction.writeEntries(wide)))).toBe('no error');
    expect(registry.peek().entries).toEqual(wide);
  });

  it('encodes exactly the canonical document it accepts', () => {
    const stateHome = makeStateHome();
    const entries = reservations(stateHome, 3);
    expect(Buffer.from(encodeEntries(entries, stateHome, 'roots.json')).toString('hex')).toBe(
      Buffer.from(encode({ schema: 'leasehold.registry/1', entries })).toString('hex'),
    );
    expect(encodeEntries([], stateHome, 'roots.json').byteLength).toBeGreaterThan(0);
  });
});

describe('invalid lists', () => {
  const cases: [string, (stateHome: string) => Reservation[]][] = [
    ['two overlapping roots', (stateHome) => [reservation(stateHome, 1, { root: '/srv/a' }), reservation(stateHome, 2, { root: '/srv/a/b' })]],
    ['an inner root listed first', (stateHome) => [reservation(stateHome, 1, { root: '/srv/a/b' }), reservation(stateHome, 2, { root: '/srv/a' })]],
    ['the root folder and anything', (stateHome) => [reservation(stateHome, 1, { root: '/' }), reservation(stateHome, 2)]],
    ['equal roots', (stateHome) => [reservation(stateHome, 1, { root: '/srv/a' }), reservation(stateHome, 2, { root: '/srv/a' })]],
    [
      'a shared endpoint',
      (stateHome) => [
        reservation(stateHome, 1, { endpoint: 'http://127.0.0.1:8080' }),
        reservation(stateHome, 2, { endpoint: 'http://127.0.0.1:8080' }),
      ],
    ],
    ['an entry of another state home', (stateHome) => [reservation(stateHome, 1), reservation('/elsewhere/state', 2)]],
    ['a single entry of another state home', () => [reservation('/elsewhere/state', 1)]],
    ['a relative root', (stateHome) => [reservation(stateHome, 1, { root: 'srv/a' })]],
    ['an unnormalised root', (stateHome) => [reservation(stateHome, 1, { root: '/srv/a/../b' })]],
    ['a root with a trailing slash', (stateHome) => [reservation(stateHome, 1, { root: '/srv/a/' })]],
    ['an uppercase epoch', (stateHome) => [reservation(stateHome, 1, { epoch: 'AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA' })]],
    ['an endpoint that is not loopback', (stateHome) => [reservation(stateHome, 1, { endpoint: 'http://10.0.0.1:80' })]],
  ];

  it.each(cases)('refuses %s with nothing written', async (_, make) => {
    const { stateHome, registry } = await registryWith();
    const existing = [reservation(stateHome, 40)];
    await registry.transaction((transaction) => transaction.writeEntries(existing));
    const entries = make(stateHome);
    expect(await codeOfAsync(() => encodeEntries(entries, stateHome, 'roots.json'))).toBe('refused');
    expect(await refusedWrite(registry, entries)).toEqual({ code: 'refused', dirty: false });
    expect(registry.peek().entries).toEqual(existing);
  });

  it('accepts siblings whose names share a prefix (/a/b and /a/bc)', async () => {
    const { stateHome, registry } = await registryWith();
    const entries = [reservation(stateHome, 1, { root: '/a/b' }), reservation(stateHome, 2, { root: '/a/bc' })];
    expect(await codeOfAsync(registry.transaction((transaction) => transaction.writeEntries(entries)))).toBe('no error');
    expect(registry.peek().entries).toEqual(entries);
  });
});
