#!/usr/bin/env node
// The repository's layer check (README.md, "Layers"): which package may
// use which, the `workspace:` ranges and the public entry points are enforced
// here, in the test run, so they never depend on someone noticing them in review.
//
// Usage: node tooling/scripts/check-layers.mjs [repoRoot]
// Prints one OK line and exits 0, or one line per violation and exits 1.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

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
  bench: ['contracts', 'private-files', 'registry', 'coordination', 'recovery', 'transport', 'etcd', 'cli', 'test-utils'],
};

const scope = '@leasehold/';
// Examples (examples/<folder>, named @leasehold/example-<folder>) are
// downstream users: they may use every published layer, never the other way.
const examplePrefix = `${scope}example-`;
const runtimeFields = ['dependencies', 'peerDependencies', 'optionalDependencies'];
const devFields = ['devDependencies'];
// pnpm publishes `workspace:^` as a caret range, so users can dedupe packages
// that are versioned apart; a dev-only dependency never ships, so it pins to
// whatever is in the workspace.
const runtimeRange = 'workspace:^';
const devRange = 'workspace:*';
// Build output, installed packages and caches are not our sources.
const skippedFolders = new Set(['node_modules', 'dist', '.turbo', 'coverage']);
const sourceFile = /\.(?:[cm]?[jt]s|[jt]sx)$/;
// Only these calls load a module by name; `x.from('a')` or `s.import('b')` do not.
const loadingCalls = new Set([
  'import',
  'require',
  'require.resolve',
  'import.meta.resolve',
  'vi.mock',
  'vi.doMock',
  'vi.importActual',
  'vi.importMock',
]);

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
          problems.push(`layer ${layer} may use ${lower} but not what ${lower} may use: ${missing.join(', ')} (the map must be transitively closed)`);
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
        if (missing.length > 0) problems.push(`helper ${helper} may use ${name} but not what ${name} may use: ${missing.join(', ')}`);
      } else if (!Object.hasOwn(layerMap, name)) {
        problems.push(`helper ${helper} may use ${name}, which is neither a layer nor a helper`);
      }
    }
  }
  return problems;
}

{
  const problems = layerMapProblems(layers, helpers);
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
  const repo = loadRepository(resolve(repoRoot));
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

function loadRepository(root) {
  const packagesDir = join(root, 'packages');
  if (!existsSync(packagesDir) || !statSync(packagesDir).isDirectory()) {
    throw new Error(`check-layers: ${packagesDir} is not a folder`);
  }
  const examplesDir = join(root, 'examples');
  const packages = [
    ...listPackages(packagesDir, 'packages'),
    ...(existsSync(examplesDir) && statSync(examplesDir).isDirectory() ? listPackages(examplesDir, 'examples') : []),
  ];
  const byName = new Map(packages.map((workspacePackage) => [workspacePackage.name, workspacePackage]));
  return { root, packagesDir, toolingDir: join(root, 'tooling'), packages, byName };
}

// A folder without package.json is not a workspace package to pnpm (it may
// be one being started), so there is nothing in it to build, publish or check.
function listPackages(parentDir, parent) {
  return readdirSync(parentDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(parentDir, entry.name, 'package.json')))
    .map((entry) => loadPackage(join(parentDir, entry.name), parent, entry.name))
    .sort((left, right) => left.folder.localeCompare(right.folder));
}

function loadPackage(dir, parent, folder) {
  const manifestFile = join(dir, 'package.json');
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(manifestFile, 'utf8'));
  } catch {
    manifest = undefined;
  }
  const name = typeof manifest?.name === 'string' ? manifest.name : undefined;
  const isExample = parent === 'examples';
  return {
    dir,
    folder,
    manifestFile,
    manifest,
    name,
    label: name ?? `${parent}/${folder}`,
    expectedName: isExample ? examplePrefix + folder : scope + folder,
    where: `${parent}/${folder}`,
    kind: isExample ? 'example' : kindOf(name),
    isPrivate: manifest?.private === true,
  };
}

/** `layer`, `helper` or `unknown` for a name under packages/. */
function kindOf(name) {
  const shortName = name?.startsWith(scope) ? name.slice(scope.length) : undefined;
  if (shortName !== undefined && Object.hasOwn(layers, shortName)) return 'layer';
  if (shortName !== undefined && Object.hasOwn(helpers, shortName)) return 'helper';
  return 'unknown';
}

const qualify = (shortNames) => shortNames.map((shortName) => scope + shortName);

/**
 * What a package may use: at runtime, and in all (runtime plus dev-only, the
 * helpers); `because` says why another name is refused. Undefined for a
 * package that is not placed (it is refused for that alone).
 */
function allowanceOf(workspacePackage) {
  const shortName = workspacePackage.name?.slice(scope.length);
  const helperNames = qualify(Object.keys(helpers));
  const list = (names) => (names.length === 0 ? 'none' : names.join(', '));
  if (workspacePackage.kind === 'layer') {
    const below = layers[shortName];
    return {
      runtime: new Set(qualify(below)),
      all: new Set([...qualify(below), ...helperNames]),
      because: `which is not below it in the layers (${shortName} may use: ${list(below)})`,
      who: 'a layered package',
    };
  }
  if (workspacePackage.kind === 'helper') {
    const uses = helpers[shortName];
    return {
      runtime: new Set(qualify(uses)),
      all: new Set(qualify(uses)),
      because: `which the helper ${shortName} may not use (it may use: ${list(uses)})`,
      who: 'a helper',
    };
  }
  if (workspacePackage.kind === 'example') {
    const published = Object.keys(layers);
    return {
      runtime: new Set(qualify(published)),
      all: new Set([...qualify(published), ...helperNames]),
      because: 'which is not a layer; an example may use the layers (and helpers as devDependencies) only',
      who: 'an example',
    };
  }
  return undefined;
}

function checkManifest(workspacePackage, repo, report) {
  const { manifest, manifestFile, name, kind } = workspacePackage;
  if (typeof manifest !== 'object' || manifest === null || Array.isArray(manifest)) {
    report(manifestFile, 'package.json is not a JSON object');
    return;
  }
  // Folders are the short names, so a path under packages/ tells whose code it is.
  if (name !== workspacePackage.expectedName) {
    report(manifestFile, `folder ${workspacePackage.where} must hold the package "${workspacePackage.expectedName}", not ${JSON.stringify(name)}`);
  }
  if (kind === 'unknown') {
    report(manifestFile, 'is not in the layer map (tooling/scripts/check-layers.mjs): place it as a layer, with the layers it may use, or as a private helper');
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
    problems.push(`${field}["${dependency}"] is ${JSON.stringify(range)}; ${kind} internal dependency must be "${expected}"`);
  }
  if (dependency === workspacePackage.name) {
    problems.push(`depends on itself (${field})`);
    return problems;
  }
  if (!repo.byName.has(dependency)) {
    problems.push(`depends on ${dependency} (${field}), which is not a package in this workspace`);
  }
  const allowance = allowanceOf(workspacePackage);
  if (allowance === undefined) return problems;
  if (!allowance.all.has(dependency)) {
    problems.push(`depends on ${dependency} (${field}), ${allowance.because}`);
  } else if (isRuntime && !allowance.runtime.has(dependency)) {
    // A helper could itself depend on any layer, so a package that ships
    // with it would close a cycle around the layers.
    problems.push(`depends at runtime on ${dependency} (${field}), which is a helper, not a layer; ${allowance.who} may use a helper package only as a devDependency`);
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

function listSourceFiles(dir, report) {
  const files = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isSymbolicLink()) {
      if (isSourceOrFolderLink(path, entry.name)) {
        report(path, 'is a symbolic link; the layer check does not follow links, so it cannot see what this one reaches');
      }
    } else if (entry.isDirectory()) {
      if (!skippedFolders.has(entry.name)) files.push(...listSourceFiles(path, report));
    } else if (entry.isFile() && sourceFile.test(entry.name)) {
      files.push(path);
    }
  }
  return files.sort();
}

function isSourceOrFolderLink(path, name) {
  if (sourceFile.test(name)) return true;
  try {
    return statSync(path).isDirectory();
  } catch {
    return false; // a dangling link reaches nothing
  }
}

function checkSourceFile(file, workspacePackage, repo, report) {
  const source = readFileSync(file, 'utf8');
  for (const { specifier, line } of findImportSpecifiers(source, file)) {
    for (const message of specifierProblems(specifier, file, workspacePackage, repo)) {
      report(`${file}:${line}`, message);
    }
  }
}

/** What is wrong with one module specifier found in a file of `workspacePackage`. */
function specifierProblems(specifier, file, workspacePackage, repo) {
  if (specifier.startsWith(scope)) return internalSpecifierProblems(specifier, workspacePackage);
  if (isPathSpecifier(specifier)) return pathSpecifierProblems(specifier, file, workspacePackage, repo);
  return [];
}

function internalSpecifierProblems(specifier, workspacePackage) {
  const [, shortName, subpath] = /^@leasehold\/([^/]*)(?:\/(.*))?$/s.exec(specifier);
  const name = scope + shortName;
  const problems = [];
  // Only the exports map is a contract; a file path is an implementation
  // detail that changes without a major version.
  if (subpath !== undefined && subpath !== 'package.json') {
    problems.push(`deep import "${specifier}"; import the public entry point "${name}"`);
  }
  // A package may name itself (Node's self-reference through its own exports).
  if (name === workspacePackage.name) return problems;
  if (!declaredDependencies(workspacePackage.manifest).has(name)) {
    problems.push(`imports "${name}", which is not declared in its package.json`);
  }
  // Whether a helper is imported at runtime is judged on the manifest.
  const allowance = allowanceOf(workspacePackage);
  if (allowance !== undefined && !allowance.all.has(name)) {
    problems.push(`imports "${name}", ${allowance.because}`);
  }
  return problems;
}

function declaredDependencies(manifest) {
  const names = new Set();
  for (const field of [...runtimeFields, ...devFields]) {
    const dependencies = manifest?.[field];
    if (typeof dependencies === 'object' && dependencies !== null) {
      for (const name of Object.keys(dependencies)) names.add(name);
    }
  }
  return names;
}

function isPathSpecifier(specifier) {
  return /^\.\.?(?:\/|$)/.test(specifier) || specifier.startsWith('/') || specifier.startsWith('file:');
}

function pathSpecifierProblems(specifier, file, workspacePackage, repo) {
  let target;
  try {
    target = specifier.startsWith('file:') ? fileURLToPath(specifier) : resolve(dirname(file), specifier);
  } catch {
    return [`import "${specifier}" is not a valid file URL`];
  }
  if (isInside(workspacePackage.dir, target)) return [];
  // Shared configuration lives once in tooling/ and every package extends it.
  if (isInside(repo.toolingDir, target)) return [];
  if (isInside(repo.packagesDir, target)) {
    const otherFolder = relative(repo.packagesDir, target).split(sep)[0];
    return [`import "${specifier}" reaches into another package (packages/${otherFolder}); import its public entry point instead`];
  }
  return [`import "${specifier}" escapes the package folder`];
}

function isInside(folder, path) {
  const fromFolder = relative(folder, path);
  return fromFolder === '' || (fromFolder !== '..' && !fromFolder.startsWith(`..${sep}`) && !isAbsolute(fromFolder));
}

/**
 * The module specifiers a JavaScript or TypeScript source loads: `import` and
 * `export ... from`, bare `import 'x'`, `import type`, `import x = require('x')`,
 * `typeof import('x')`, `import('x')`, `require('x')` and a few resolver
 * calls. TypeScript's own parser reads the file, so a commented-out import, or
 * one inside a string, regular expression or template, is not one. It walks
 * the syntax tree because `ts.preProcessFile` misses the resolver and mock calls.
 * Specifiers built at run time (`import(variable)`, templates with `${}`)
 * cannot be seen.
 * @param {string} source
 * @param {string} [fileName] picks the syntax (`.tsx` and `.jsx` allow JSX)
 * @returns {{ specifier: string, line: number }[]}
 */
export function findImportSpecifiers(source, fileName = 'source.ts') {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true);
  const found = [];
  const visit = (node) => {
    const literal = loadedLiteral(node);
    if (literal !== undefined) {
      const { line } = file.getLineAndCharacterOfPosition(literal.getStart(file));
      found.push({ specifier: literal.text, line: line + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/** The string literal naming the module `node` loads, if it loads one. */
function loadedLiteral(node) {
  let literal;
  if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) literal = node.moduleSpecifier;
  else if (ts.isExternalModuleReference(node)) literal = node.expression;
  else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) literal = node.argument.literal;
  else if (ts.isCallExpression(node) && loadingCalls.has(calleeName(node.expression))) literal = node.arguments[0];
  return literal !== undefined && ts.isStringLiteralLike(literal) ? literal : undefined;
}

/** The dotted name of a callee, e.g. `require.resolve`; undefined when it is not a plain name. */
function calleeName(expression) {
  if (expression.kind === ts.SyntaxKind.ImportKeyword) return 'import';
  if (ts.isIdentifier(expression)) return expression.text;
  if (ts.isMetaProperty(expression)) return `${ts.tokenToString(expression.keywordToken)}.${expression.name.text}`;
  if (ts.isPropertyAccessExpression(expression) && ts.isIdentifier(expression.name)) {
    const object = calleeName(expression.expression);
    return object === undefined ? undefined : `${object}.${expression.name.text}`;
  }
  return undefined;
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
