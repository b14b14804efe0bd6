#!/usr/bin/env node
// The unique-names check: across every public package's entry point, one
// exported name stands for one declaration. A package may re-export a name
// of a layer below (the same declaration, so one install is enough); two
// packages may not export one name for two different things, which a user
// importing both would have to rename.
//
// Usage: node tooling/scripts/check-names.mjs [repoRoot]   (after `pnpm build`)
// Prints each collision; exits 1 when there is one.
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { publicDeclarations } from '@leasehold/package-checks';
import { publicPackages } from './check-packages.mjs';

/** `exports` is [package name, { name, declaredAt }[]][]: each name exported for more than one declaration, with who exports which. */
export function collisions(exports) {
  const byName = new Map();
  for (const [packageName, declarations] of exports) {
    for (const { name, declaredAt } of declarations) {
      const places = byName.get(name) ?? new Map();
      places.set(declaredAt, [...(places.get(declaredAt) ?? []), packageName]);
      byName.set(name, places);
    }
  }
  return [...byName]
    .filter(([, places]) => places.size > 1)
    .map(
      ([name, places]) =>
        `${name}: ${[...places].map(([declaredAt, packages]) => `${packages.join(', ')} (${declaredAt.replace(/^.*\/packages\//, '')})`).join(' vs ')}`,
    );
}

/** The collisions of the public packages under `root`, and how many names they export. */
export function checkNames(root) {
  const exports = publicPackages(root).map(({ dir, manifest }) => [manifest.name, publicDeclarations(dir)]);
  const names = new Set(exports.flatMap(([, declarations]) => declarations.map(({ name }) => name)));
  return { problems: collisions(exports), names: names.size, packages: exports.length };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { problems, names, packages } = checkNames(resolve(process.argv[2] ?? '.'));
  for (const problem of problems) console.error(`check-names: ${problem}`);
  console.log(
    `check-names: ${problems.length === 0 ? 'OK' : 'FAILED'}, ${names} names over ${packages} packages, ${problems.length} exported for two things`,
  );
  process.exitCode = problems.length === 0 ? 0 : 1;
}
