import { chmodSync } from 'node:fs';
import { encode, type Reservation } from '@leasehold/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, codeOfAsync, namesIn, pathExists } from '@leasehold/test-utils';
import {
  TEST_ROOT,
  bytesOf,
  failedTransaction,
  makeStateHome,
  reservation,
  writePrivateFile,
} from '../test/helpers.js';
import { Registry } from './index.js';

afterEach(cleanUp);

/** The text of a roots.json holding `entries` as given, whatever they are (canonical JSON). */
function rootsText(entries: readonly Reservation[]): string {
  return new TextDecoder().decode(encode({ schema: 'leasehold.registry/1', entries }));
}

// Each case is the text of a corrupt roots.json for a registry of `stateHome`.
const cases: [string, (stateHome: string) => string][] = [
  ['bad JSON', () => '{"entries":[],"schema":"leasehold.registry/1"'],
  ['not an object', () => '[]'],
  ['a duplicate key', () => '{"entries":[],"schema":"leasehold.registry/1","schema":"leasehold.registry/1"}'],
  [
    'a duplicate key inside an entry',
    (stateHome) => {
      const text = rootsText([reservation(stateHome, 1)]);
      return text.replace('"pid":', '"pid":1,"pid":');
    },
  ],
  ['an unknown key', () => '{"entries":[],"extra":true,"schema":"leasehold.registry/1"}'],
  ['an unknown key in an entry', (stateHome) => rootsText([{ ...reservation(stateHome, 1), extra: 1 } as Reservation])],
  ['a missing key', () => '{"schema":"leasehold.registry/1"}'],
  ['another schema tag', () => '{"entries":[],"schema":"leasehold.registry/2"}'],
  ['an entry of another state home', () => rootsText([reservation('/elsewhere/state', 1)])],
  ['a relative root', (stateHome) => rootsText([reservation(stateHome, 1, { root: 'srv/a' })])],
  ['an unnormalised root (..)', (stateHome) => rootsText([reservation(stateHome, 1, { root: '/a/../b' })])],
  ['an unnormalised root (trailing slash)', (stateHome) => rootsText([reservation(stateHome, 1, { root: '/a/b/' })])],
  [
    'overlapping roots',
    (stateHome) => rootsText([reservation(stateHome, 1, { root: '/a' }), reservation(stateHome, 2, { root: '/a/b' })]),
  ],
  [
    'equal roots',
    (stateHome) => rootsText([reservation(stateHome, 1, { root: '/a' }), reservation(stateHome, 2, { root: '/a' })]),
  ],
  [
    'a shared endpoint',
    (stateHome) =>
      rootsText([
        reservation(stateHome, 1, { endpoint: 'http://127.0.0.1:9000' }),
        reservation(stateHome, 2, { endpoint: 'http://127.0.0.1:9000' }),
      ]),
  ],
  ['a byte-order mark', () => '\ufeff{"entries":[],"schema":"leasehold.registry/1"}'],
];

describe('a corrupt roots.json', () => {
  it.each(cases)(
    'is refused (%s): list, rowOf and transactions refuse, the file stays, no lock is left',
    async (_, corrupt) => {
      const stateHome = makeStateHome();
      const registry = new Registry(stateHome);
      await registry.transaction(TEST_ROOT, () => undefined);
      writePrivateFile(registry.layout.roots, corrupt(stateHome));
      const before = bytesOf(registry.layout.roots);
      const format = bytesOf(registry.layout.registryFormat);

      expect(await codeOfAsync(() => registry.list())).toBe('refused');
      expect(await codeOfAsync(() => registry.rowOf('/srv/workspace-1'))).toBe('refused');
      expect(await failedTransaction(registry, TEST_ROOT)).toEqual({ code: 'refused', ran: false });
      expect(bytesOf(registry.layout.roots)).toBe(before);
      expect(bytesOf(registry.layout.registryFormat)).toBe(format);
      // The failure came before any write, so the lock is removed (docs/ownership.md, "The registry transaction", step 5).
      expect(pathExists(registry.layout.registryLock)).toBe(false);
      expect(registry.readLock()).toBeUndefined();
      expect(namesIn(registry.layout.staging)).toEqual([]);
      // The corrupt file itself keeps refusing: nothing repaired or replaced it.
      expect(await failedTransaction(new Registry(stateHome), TEST_ROOT)).toEqual({ code: 'refused', ran: false });
      expect(bytesOf(registry.layout.roots)).toBe(before);
      expect(pathExists(registry.layout.registryLock)).toBe(false);
      expect(await codeOfAsync(() => registry.list())).toBe('refused');
    },
  );

  it('is refused when it is not private (group-readable), like any unsafe file', async () => {
    const stateHome = makeStateHome();
    const registry = new Registry(stateHome);
    await registry.transaction(TEST_ROOT, () => undefined);
    chmodSync(registry.layout.roots, 0o640);
    expect(await codeOfAsync(() => registry.list())).toBe('refused');
    expect(await codeOfAsync(() => registry.rowOf('/srv/a'))).toBe('refused');
    expect(await codeOfAsync(registry.transaction(TEST_ROOT, () => undefined))).toBe('refused');
    expect(pathExists(registry.layout.registryLock)).toBe(false);
  });
});
