import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { REGISTRY_BYTES, decodeBytes, reservationTableSchema, type Reservation } from '@leasehold/contracts';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, codeOf, codeOfAsync, namesIn, pathExists } from '@leasehold/test-utils';
import { makeStateHome, reservation } from '../test/helpers.js';
import { Registry, rootsOverlap } from './index.js';
import { validateEntries } from './registry-view.js';

afterEach(cleanUp);

// A few roots that overlap in every way (equal, ancestor, descendant, a
// string prefix that is no segment prefix) and few endpoints, so that
// conflicts are frequent.
const ROOTS = ['/p', '/p/a', '/p/a/b', '/p/ab', '/q', '/q/c'] as const;
const PORTS = [7001, 7002, 7003] as const;

type Operation =
  | { readonly kind: 'reserve'; readonly root: string; readonly port: number }
  | { readonly kind: 'unreserve'; readonly pick: number; readonly exactEpoch: boolean };

interface Step {
  readonly operations: readonly Operation[];
  /** The operation throws after its operations: what it wrote stands, and the lock is removed. */
  readonly failAtEnd: boolean;
}

const operation: fc.Arbitrary<Operation> = fc.oneof(
  fc.record({
    kind: fc.constant('reserve' as const),
    root: fc.constantFrom(...ROOTS),
    port: fc.constantFrom(...PORTS),
  }),
  fc.record({ kind: fc.constant('unreserve' as const), pick: fc.nat({ max: 7 }), exactEpoch: fc.boolean() }),
);
const step: fc.Arbitrary<Step> = fc.record({
  operations: fc.array(operation, { minLength: 1, maxLength: 4 }),
  failAtEnd: fc.boolean(),
});

/** The model of the table: a list in which a row is added at the end and removed in place, under the table's rules (docs/layout.md, "The registry table and its lock"). */
class Model {
  rows: Reservation[] = [];

  reserve(row: Reservation): string {
    if (this.rows.some((entry) => rootsOverlap(entry.root, row.root) || entry.endpoint === row.endpoint))
      return 'conflict';
    this.rows = [...this.rows, row];
    return 'no error';
  }

  unreserve(root: string, epoch: string): string {
    const index = this.rows.findIndex((entry) => entry.root === root && entry.epoch === epoch);
    if (index < 0) return 'conflict';
    this.rows = this.rows.filter((_, position) => position !== index);
    return 'no error';
  }
}

describe('the table compare-and-swap against a model', () => {
  it('any sequence of transactions of reserve and unreserve agrees with the model, and roots.json always decodes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 6 }), async (steps) => {
        const stateHome = makeStateHome();
        const registry = new Registry(stateHome);
        const model = new Model();
        let made = 0;
        for (const { operations, failAtEnd } of steps) {
          const failure = new Error('the operation fails after its writes');
          const attempt = registry.transaction('/p', (transaction) => {
            for (const planned of operations) {
              let expected: string;
              let actual: string;
              if (planned.kind === 'reserve') {
                made += 1;
                const row = reservation(stateHome, made, {
                  root: planned.root,
                  endpoint: `http://127.0.0.1:${planned.port}`,
                });
                expected = model.reserve(row);
                actual = codeOf(() => transaction.reserve(row));
              } else {
                // An existing row (its exact epoch, or another one), or a root without a row.
                const target = model.rows[planned.pick % Math.max(model.rows.length, 1)];
                const root = target?.root ?? ROOTS[planned.pick % ROOTS.length]!;
                const epoch = target !== undefined && planned.exactEpoch ? target.epoch : randomUUID();
                expected = model.unreserve(root, epoch);
                actual = codeOf(() => transaction.unreserve(root, epoch));
              }
              expect(actual).toBe(expected);
              expect(transaction.entries).toEqual(model.rows);
            }
            if (failAtEnd) throw failure;
          });
          if (failAtEnd) await expect(attempt).rejects.toBe(failure);
          else expect(await codeOfAsync(attempt)).toBe('no error');

          // Success or failure: the table on disk is the model's, whole and valid, and no lock is left.
          const onDisk = decodeBytes(
            reservationTableSchema,
            readFileSync(registry.layout.roots),
            REGISTRY_BYTES,
            'roots.json',
          );
          expect(codeOf(() => validateEntries(onDisk.entries, stateHome, 'roots.json'))).toBe('no error');
          expect(onDisk.entries).toEqual(model.rows);
          expect(registry.list().entries).toEqual(model.rows);
          for (const root of ROOTS)
            expect(registry.rowOf(root).row).toEqual(model.rows.find((entry) => entry.root === root));
          expect(pathExists(registry.layout.registryLock)).toBe(false);
          expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
          expect(namesIn(registry.layout.staging)).toEqual([]);
        }
      }),
      { numRuns: 60 },
    );
  });
});
