// The checks on a package's manifest: its name and placement, README, exports map,
// `workspace:` ranges, what its dependencies may be, and the targets of its "imports" field.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { devFields, runtimeFields, scope } from './repository.mjs';
import { specifierProblems } from './source-checks.mjs';

// pnpm publishes `workspace:^` as a caret range, so users can dedupe packages
// that are versioned apart; a dev-only dependency never ships, so it pins to
// whatever is in the workspace.
const runtimeRange = 'workspace:^';
const devRange = 'workspace:*';

/** Reports what is wrong with a package's manifest (and its README, which the manifest's folder must hold). */
export function checkManifest(workspacePackage, repo, report) {
  const { manifest, manifestFile, name, kind } = workspacePackage;
  if (typeof manifest !== 'object' || manifest === null || Array.isArray(manifest)) {
    report(manifestFile, 'package.json is not a JSON object');
    return;
  }
  // Folders are the short names, so a path under packages/ tells whose code it is.
  if (name !== workspacePackage.expectedName) {
    report(
      manifestFile,
      `folder ${workspacePackage.where} must hold the package "${workspacePackage.expectedName}", not ${JSON.stringify(name)}`,
    );
  }
  if (kind === 'unknown') {
    report(
      manifestFile,
      'is not in the layer map (tooling/scripts/check-layers.mjs): place it as a layer, with the layers it may use, or as a private helper',
    );
  }
  if ((kind === 'helper' || kind === 'example') && !workspacePackage.isPrivate) {
    report(manifestFile, `is ${kind === 'helper' ? 'a helper' : 'an example'}, so it must be "private": true`);
  }
  if (!existsSync(join(workspacePackage.dir, 'README.md'))) {
    report(manifestFile, 'has no README.md');
  }
  // An example is an application: nothing imports it, so it needs no entry point.
  if (kind !== 'example') checkExportsMap(workspacePackage, report);
  checkDependencies(workspacePackage, repo, report);
  checkImportsField(workspacePackage, repo, report);
}

// The exports map is what makes the public entry point explicit; without it
// every file of the package can be imported.
function checkExportsMap({ manifest, manifestFile }, report) {
  const { exports } = manifest;
  if (exports === undefined || exports === null) {
    report(manifestFile, 'has no "exports" map');
    return;
  }
  if (typeof exports === 'string') return;
  const keys = typeof exports === 'object' ? Object.keys(exports) : [];
  const isSubpathMap = keys.some((key) => key.startsWith('.'));
  if (keys.length === 0 || (isSubpathMap && !keys.includes('.'))) {
    report(manifestFile, 'its "exports" map has no "." entry');
  }
}

function checkDependencies(workspacePackage, repo, report) {
  for (const field of [...runtimeFields, ...devFields]) {
    const dependencies = workspacePackage.manifest[field];
    if (dependencies === undefined) continue;
    if (typeof dependencies !== 'object' || dependencies === null || Array.isArray(dependencies)) {
      report(workspacePackage.manifestFile, `"${field}" is not an object`);
      continue;
    }
    for (const [dependency, range] of Object.entries(dependencies)) {
      if (!dependency.startsWith(scope)) continue;
      for (const message of dependencyProblems(workspacePackage, dependency, field, range, repo)) {
        report(workspacePackage.manifestFile, message);
      }
    }
  }
}

function dependencyProblems(workspacePackage, dependency, field, range, repo) {
  const problems = [];
  const isRuntime = runtimeFields.includes(field);
  const expected = isRuntime ? runtimeRange : devRange;
  if (range !== expected) {
    const kind = isRuntime ? 'a runtime' : 'a dev-only';
    problems.push(
      `${field}["${dependency}"] is ${JSON.stringify(range)}; ${kind} internal dependency must be "${expected}"`,
    );
  }
  if (dependency === workspacePackage.name) {
    problems.push(`depends on itself (${field})`);
    return problems;
  }
  if (!repo.byName.has(dependency)) {
    problems.push(`depends on ${dependency} (${field}), which is not a package in this workspace`);
  }
  const { allowance } = workspacePackage;
  if (allowance === undefined) return problems;
  if (!allowance.all.has(dependency)) {
    problems.push(`depends on ${dependency} (${field}), ${allowance.because}`);
  } else if (isRuntime && allowance.seam?.has(dependency)) {
    problems.push(`depends at runtime on ${dependency} (${field}), ${allowance.belowSeam}`);
  } else if (isRuntime && !allowance.runtime.has(dependency)) {
    // A helper could itself depend on any layer, so a package that ships
    // with it would close a cycle around the layers.
    problems.push(
      `depends at runtime on ${dependency} (${field}), which is a helper, not a layer; ${allowance.who} may use a helper package only as a devDependency`,
    );
  }
  return problems;
}

// Subpath imports (`#name`) are declared in package.json, so their targets
// could reach around the public entry point just as an import could.
function checkImportsField(workspacePackage, repo, report) {
  const targets = stringLeaves(workspacePackage.manifest.imports);
  for (const target of targets) {
    for (const message of specifierProblems(target, workspacePackage.manifestFile, workspacePackage, repo)) {
      report(workspacePackage.manifestFile, `"imports" ${message}`);
    }
  }
}

function stringLeaves(value) {
  if (typeof value === 'string') return [value];
  if (typeof value !== 'object' || value === null) return [];
  return Object.values(value).flatMap(stringLeaves);
}
