#!/usr/bin/env node
// The repository's layer check (README.md, "Layers"): which package may
// use which, the `workspace:` ranges and the public entry points are enforced
// here, in the test run, so they never depend on someone noticing them in review.
//
// Usage: node tooling/scripts/check-layers.mjs [repoRoot]
// Prints one OK line and exits 0, or one line per violation and exits 1.
//
// The layer map is here, with the command; the rest is in check-layers/: the workspace
// and what each package may use (repository.mjs), the manifest checks
// (manifest-checks.mjs), the source-file checks (source-checks.mjs) and the reading of
// a file's imports (import-specifiers.mjs).
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { checkManifest } from './check-layers/manifest-checks.mjs';
import { loadRepository } from './check-layers/repository.mjs';
import { checkSourceFile, listSourceFiles } from './check-layers/source-checks.mjs';

/**
 * The layers (the diagram in README.md, "Layers"), each with every layer it may depend on: the
 * layers below it, transitively closed, so a line here is the whole answer.
 * Layers are a DAG, not a line: recovery and transport are siblings above
 * coordination (neither may use the other), and etcd sits on private-files.
 * state-home sits on recovery and etcd (loaded only for a state home that
 * records etcd), below cli, so a daemon needs no cli to open a state home.
 * A package that is neither here nor in `helpers` is refused, so a new one
 * is placed deliberately. An entry whose folder does not exist yet is fine.
 */
export const layers = {
  contracts: [],
  'private-files': ['contracts'],
  registry: ['contracts', 'private-files'],
  coordination: ['contracts', 'private-files', 'registry'],
  recovery: ['contracts', 'private-files', 'registry', 'coordination'],
  transport: ['contracts', 'private-files', 'registry', 'coordination'],
  etcd: ['contracts', 'private-files'],
  // Which backend a state home records, opened: the file backend, or etcd over this host's files.
  'state-home': ['contracts', 'private-files', 'registry', 'coordination', 'recovery', 'etcd'],
  cli: ['contracts', 'private-files', 'registry', 'coordination', 'recovery', 'transport', 'etcd', 'state-home'],
};

/**
 * The seam (README.md, "Layers"): for a layer above it, the layers below that it may depend on
 * (the map above is closed) but may not import outside its tests. What it needs of a backend comes
 * through the seam (contracts' `Ownership` and `Recovery`, answered by every backend), and what is
 * no backend's knowledge (errno narrowing, a root's realpath) through the re-exports of the layer
 * right below it. Its tests may import them, as devDependencies only, to arrange by hand what no
 * seam call does (a dead registry writer's lock, a held checkout lock).
 * transport keeps its start claims in this host's files (private-files, coordination's places), a
 * job of its own; the registry is coordination's alone.
 */
export const belowTheSeam = {
  cli: ['private-files', 'registry', 'coordination'],
  transport: ['registry'],
};

/**
 * Private helper packages, each with the layers it may depend on. A helper is
 * never published and a layer or an example uses it only as a devDependency.
 * test-utils stays on contracts: every other layer dev-depends on it, so
 * anything higher would close a cycle in the workspace graph.
 */
export const helpers = {
  'test-utils': ['contracts'],
  // package-checks reads READMEs and built entry points of any package, so it
  // depends on none: even contracts can dev-depend on it.
  'package-checks': [],
  // The bench starts real etcd members with test-utils' starter, the one copy of it.
  // It measures the built command as a whole process, found through the cli package's manifest.
  bench: [
    'contracts',
    'private-files',
    'registry',
    'coordination',
    'recovery',
    'transport',
    'etcd',
    'cli',
    'test-utils',
  ],
};

/**
 * What is wrong with a layer map: a name that is not a layer, a layer that
 * may use itself (or, through closure, a cycle), or a set that is not
 * transitively closed. `helpers` may name layers only.
 * @param {Record<string, string[]>} layerMap
 * @param {Record<string, string[]>} [helperMap]
 * @returns {string[]}
 */
export function layerMapProblems(layerMap, helperMap = {}) {
  const problems = [];
  for (const [layer, below] of Object.entries(layerMap)) {
    for (const lower of below) {
      if (lower === layer) {
        problems.push(`layer ${layer} may use itself`);
      } else if (!Object.hasOwn(layerMap, lower)) {
        problems.push(`layer ${layer} may use ${lower}, which is not a layer`);
      } else {
        const missing = layerMap[lower].filter((name) => !below.includes(name));
        if (missing.length > 0) {
          problems.push(
            `layer ${layer} may use ${lower} but not what ${lower} may use: ${missing.join(', ')} (the map must be transitively closed)`,
          );
        }
      }
    }
  }
  for (const [helper, uses] of Object.entries(helperMap)) {
    if (Object.hasOwn(layerMap, helper)) problems.push(`${helper} is both a layer and a helper`);
    for (const name of uses) {
      if (name === helper) {
        problems.push(`helper ${helper} may use itself`);
      } else if (Object.hasOwn(helperMap, name)) {
        // A helper on a helper must allow all the other allows, so no two helpers can close a cycle.
        const missing = helperMap[name].filter((lower) => !uses.includes(lower));
        if (missing.length > 0)
          problems.push(`helper ${helper} may use ${name} but not what ${name} may use: ${missing.join(', ')}`);
      } else if (!Object.hasOwn(layerMap, name)) {
        problems.push(`helper ${helper} may use ${name}, which is neither a layer nor a helper`);
      }
    }
  }
  return problems;
}

/**
 * What is wrong with a seam map: a package that is not a layer, or a name below the seam that the
 * layer may not use anyway (a seam entry must narrow what the layer map allows).
 * @param {Record<string, string[]>} seamMap
 * @param {Record<string, string[]>} layerMap
 * @returns {string[]}
 */
export function seamProblems(seamMap, layerMap) {
  return Object.entries(seamMap).flatMap(([layer, below]) =>
    Object.hasOwn(layerMap, layer)
      ? below
          .filter((name) => !layerMap[layer].includes(name))
          .map((name) => `${layer} has ${name} below its seam, which it may not use anyway`)
      : [`${layer} has a seam but is not a layer`],
  );
}

{
  const problems = [...layerMapProblems(layers, helpers), ...seamProblems(belowTheSeam, layers)];
  if (problems.length > 0) throw new Error(`check-layers: the layer map is wrong: ${problems.join('; ')}`);
}

/** Each layer with the layers directly below it (the map without its transitive edges). */
export function describeLayers(layerMap = layers) {
  return Object.entries(layerMap)
    .filter(([, below]) => below.length > 0)
    .map(([layer, below]) => {
      const direct = below.filter((lower) => !below.some((other) => layerMap[other]?.includes(lower)));
      return `${layer} > ${direct.join(', ')}`;
    })
    .join('; ');
}

/**
 * Checks every package under `<repoRoot>/packages`, and every example under
 * `<repoRoot>/examples` when that folder exists.
 * @param {string} repoRoot the monorepo root (holds `packages/` and `tooling/`)
 * @returns {{ violations: string[], packages: number, files: number }}
 * @throws {Error} when `<repoRoot>/packages` is not a folder
 */
export function checkLayers(repoRoot) {
  const repo = loadRepository(resolve(repoRoot), { layers, helpers, belowTheSeam });
  const violations = [];
  let files = 0;
  for (const workspacePackage of repo.packages) {
    const report = (file, message) =>
      violations.push(`${workspacePackage.label} ${relative(repo.root, file)}: ${message}`);
    checkManifest(workspacePackage, repo, report);
    for (const file of listSourceFiles(workspacePackage.dir, report)) {
      files += 1;
      checkSourceFile(file, workspacePackage, repo, report);
    }
  }
  return { violations, packages: repo.packages.length, files };
}

function main() {
  const scriptDir = dirname(fileURLToPath(import.meta.url));
  const repoRoot = process.argv[2] ?? resolve(scriptDir, '..', '..');
  const { violations, packages, files } = checkLayers(repoRoot);
  const checked = `${packages} package${packages === 1 ? '' : 's'}, ${files} source file${files === 1 ? '' : 's'}`;
  if (violations.length === 0) {
    console.log(`check-layers: OK, ${checked} (${describeLayers()})`);
    return 0;
  }
  for (const violation of violations) console.error(violation);
  console.error(`check-layers: ${violations.length} violation${violations.length === 1 ? '' : 's'} in ${checked}`);
  return 1;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    process.exitCode = main();
  } catch (error) {
    // A repository the check cannot read fails the run like a violation does.
    console.error(error instanceof Error ? error.message : String(error));
    process.exitCode = 1;
  }
}
