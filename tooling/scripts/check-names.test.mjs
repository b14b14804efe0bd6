import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { checkNames, collisions } from './check-names.mjs';

const realRepoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('one exported name, one declaration, across the packages', () => {
  it('lets a package re-export a name of a layer below', () => {
    const error = { name: 'ContractError', declaredAt: '/r/packages/contracts/dist/errors.d.ts#ContractError' };
    expect(
      collisions([
        ['@leasehold/contracts', [error]],
        ['@leasehold/etcd', [error]],
      ]),
    ).toEqual([]);
  });

  it('names each name two packages export for two declarations, with who exports which', () => {
    const exports = [
      [
        '@leasehold/contracts',
        [{ name: 'Registry', declaredAt: '/r/packages/contracts/dist/documents.d.ts#Registry' }],
      ],
      ['@leasehold/registry', [{ name: 'Registry', declaredAt: '/r/packages/registry/dist/registry.d.ts#Registry' }]],
      [
        '@leasehold/coordination',
        [{ name: 'Registry', declaredAt: '/r/packages/registry/dist/registry.d.ts#Registry' }],
      ],
    ];
    expect(collisions(exports)).toEqual([
      'Registry: @leasehold/contracts (contracts/dist/documents.d.ts#Registry) vs @leasehold/registry, @leasehold/coordination (registry/dist/registry.d.ts#Registry)',
    ]);
  });

  it('finds no collision in this repository, reading every built entry point', () => {
    const { problems, packages } = checkNames(realRepoRoot);
    expect(problems).toEqual([]);
    expect(packages).toBeGreaterThan(1);
  });
});
