#!/usr/bin/env node
// The repository's layer check (SPEC 1.5, STYLE habit 5): the layer order,
// the `workspace:` ranges and the public entry points are enforced here, in
// the test run, so they never depend on someone noticing them in review.
//
// Usage: node tooling/scripts/check-layers.mjs [repoRoot]
// Prints one OK line and exits 0, or one line per violation and exits 1.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The layers, lowest first: a layered package may depend only on layers to its left. */
export const layers = ['contracts', 'private-files', 'registry', 'coordination', 'recovery', 'cli'];

const scope = '@leasehold/';
const layerDiagram = layers.join(' <- ');
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
 * Checks every package under `<repoRoot>/packages`.
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
  // A folder without package.json is not a workspace package to pnpm (it may
  // be one being started), so there is nothing in it to build, publish or check.
  const packages = readdirSync(packagesDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(packagesDir, entry.name, 'package.json')))
    .map((entry) => loadPackage(join(packagesDir, entry.name), entry.name))
    .sort((left, right) => left.folder.localeCompare(right.folder));
  const byName = new Map(packages.map((workspacePackage) => [workspacePackage.name, workspacePackage]));
  return { root, packagesDir, toolingDir: join(root, 'tooling'), packages, byName };
}

function loadPackage(dir, folder) {
  const manifestFile = join(dir, 'package.json');
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(manifestFile, 'utf8'));
  } catch {
    manifest = undefined;
  }
  const name = typeof manifest?.name === 'string' ? manifest.name : undefined;
  return {
    dir,
    folder,
    manifestFile,
    manifest,
    name,
    label: name ?? `packages/${folder}`,
    layer: layerOf(name),
    isPrivate: manifest?.private === true,
  };
}

/** The index of a package name in the layer order, or -1 when it is not a layer. */
function layerOf(name) {
  return layers.findIndex((layer) => name === scope + layer);
}

function checkManifest(workspacePackage, repo, report) {
  const { manifest, manifestFile, name, folder } = workspacePackage;
  if (typeof manifest !== 'object' || manifest === null || Array.isArray(manifest)) {
    report(manifestFile, 'package.json is not a JSON object');
    return;
  }
  // Folders are the short names, so a path under packages/ tells whose code it is.
  if (name !== scope + folder) {
    report(manifestFile, `folder packages/${folder} must hold the package "${scope + folder}", not ${JSON.stringify(name)}`);
  }
  if (workspacePackage.layer === -1 && !workspacePackage.isPrivate) {
    report(manifestFile, `is published but not in the layer order ${layerDiagram}: place it in the order or make it "private": true`);
  }
  if (!existsSync(join(workspacePackage.dir, 'README.md'))) {
    report(manifestFile, 'has no README.md');
  }
  checkExportsMap(workspacePackage, report);
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
  if (workspacePackage.layer === -1) return problems;
  const dependencyLayer = layerOf(dependency);
  if (dependencyLayer >= workspacePackage.layer) {
    problems.push(`depends on ${dependency} (${field}), which is not below it in the layer order ${layerDiagram}`);
  }
  // A helper outside the order could itself depend on any layer, so a layered
  // package that ships with it would close a cycle around the order.
  if (dependencyLayer === -1 && isRuntime) {
    problems.push(`depends at runtime on ${dependency} (${field}), which is not in the layer order; a layered package may use a helper package only as a devDependency`);
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
  for (const { specifier, line } of findImportSpecifiers(source)) {
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
  if (workspacePackage.layer !== -1 && layerOf(name) >= workspacePackage.layer) {
    problems.push(`imports "${name}", which is not below it in the layer order ${layerDiagram}`);
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
 * `export ... from`, bare `import 'x'`, `import type`, `import('x')`,
 * `require('x')` and a few resolver calls. Comments are skipped, and a string
 * only counts where a module is loaded. Specifiers built at run time
 * (`import(variable)`, templates with `${}`) cannot be seen.
 * @param {string} source
 * @returns {{ specifier: string, line: number }[]}
 */
export function findImportSpecifiers(source) {
  const tokens = tokenize(source);
  const found = [];
  tokens.forEach((token, index) => {
    if (token.type !== 'string') return;
    const before = tokens[index - 1];
    if (before === undefined) return;
    const isFromClause = before.type === 'name' && ['from', 'import'].includes(before.value) && tokens[index - 2]?.value !== '.';
    const isLoadingCall = before.type === 'punct' && before.value === '(' && loadingCalls.has(calleeBefore(tokens, index - 1));
    if (isFromClause || isLoadingCall) found.push({ specifier: token.value, line: token.line });
  });
  return found;
}

/** The dotted name called by the `(` at `parenIndex`, e.g. `require.resolve`. */
function calleeBefore(tokens, parenIndex) {
  const parts = [];
  let index = parenIndex - 1;
  while (tokens[index]?.type === 'name') {
    parts.unshift(tokens[index].value);
    if (tokens[index - 1]?.type !== 'punct' || tokens[index - 1].value !== '.') break;
    index -= 2;
  }
  return parts.join('.');
}

// After these words a `/` starts a regular expression, not a division.
const keywordsBeforeExpression = new Set([
  'return', 'typeof', 'case', 'do', 'else', 'in', 'of', 'new', 'delete', 'void', 'throw', 'instanceof', 'yield', 'await',
]);

/**
 * A small tokenizer: names, strings, punctuation. It exists so that a
 * commented-out import, or a quote inside a regular expression or template,
 * cannot hide or invent an import.
 */
function tokenize(text) {
  // A hashbang line is not JavaScript; blank it and keep the line count.
  const source = text.startsWith('#!') ? text.replace(/^#![^\n]*/, '') : text;
  const tokens = [];
  const templateResumeDepths = [];
  let braceDepth = 0;
  let line = 1;
  let index = 0;
  const push = (type, value, startLine = line) => tokens.push({ type, value, line: startLine });
  const advanceTo = (end) => {
    line += countNewlines(source, index, end);
    index = end;
  };
  const readTemplate = (start) => {
    const chunk = readTemplateChunk(source, start);
    if (chunk.opensExpression) {
      templateResumeDepths.push(braceDepth);
      push('template-head', '');
    } else {
      push(chunk.isWhole ? 'string' : 'template', chunk.text);
    }
    advanceTo(chunk.end);
  };
  while (index < source.length) {
    const char = source[index];
    const next = source[index + 1];
    if (/\s/.test(char)) {
      advanceTo(index + 1);
    } else if (char === '/' && next === '/') {
      const end = source.indexOf('\n', index);
      advanceTo(end === -1 ? source.length : end);
    } else if (char === '/' && next === '*') {
      const end = source.indexOf('*/', index + 2);
      advanceTo(end === -1 ? source.length : end + 2);
    } else if (char === '"' || char === "'") {
      const quoted = readQuoted(source, index);
      push('string', quoted.text);
      advanceTo(quoted.end);
    } else if (char === '`') {
      readTemplate(index);
    } else if (char === '}' && templateResumeDepths.at(-1) === braceDepth) {
      templateResumeDepths.pop();
      readTemplate(index);
    } else if (char === '/' && startsExpression(tokens.at(-1))) {
      const end = regexEnd(source, index);
      push(end === undefined ? 'punct' : 'regex', '/');
      advanceTo(end ?? index + 1);
    } else if (/[\p{ID_Start}$_]/u.test(char)) {
      const name = /^[\p{ID_Continue}$\u200c\u200d]+/u.exec(source.slice(index, index + 256))[0];
      push('name', name);
      advanceTo(index + name.length);
    } else if (/[0-9]/.test(char)) {
      const number = /^[\w.]+/.exec(source.slice(index, index + 256))[0];
      push('number', number);
      advanceTo(index + number.length);
    } else {
      if (char === '{') braceDepth += 1;
      if (char === '}') braceDepth -= 1;
      push('punct', char);
      advanceTo(index + 1);
    }
  }
  return tokens;
}

function countNewlines(source, start, end) {
  let count = 0;
  for (let index = source.indexOf('\n', start); index !== -1 && index < end; index = source.indexOf('\n', index + 1)) {
    count += 1;
  }
  return count;
}

function startsExpression(previous) {
  if (previous === undefined) return true;
  if (previous.type === 'name') return keywordsBeforeExpression.has(previous.value);
  if (previous.type === 'punct') return ![')', ']'].includes(previous.value);
  return previous.type === 'template-head';
}

/** A quoted string from `start` (its opening quote): its text and where it ends. */
function readQuoted(source, start) {
  const quote = source[start];
  let text = '';
  let index = start + 1;
  while (index < source.length && source[index] !== quote && source[index] !== '\n') {
    if (source[index] === '\\') {
      text += source[index + 1] ?? '';
      index += 2;
    } else {
      text += source[index];
      index += 1;
    }
  }
  return { text, end: Math.min(index + 1, source.length) };
}

/**
 * One literal piece of a template, from its opening backtick or the `}` that
 * closes a `${`: up to the closing backtick or the next `${`.
 */
function readTemplateChunk(source, start) {
  const isWhole = source[start] === '`';
  let text = '';
  let index = start + 1;
  while (index < source.length) {
    const char = source[index];
    if (char === '\\') {
      text += source[index + 1] ?? '';
      index += 2;
    } else if (char === '`') {
      return { text, end: index + 1, isWhole, opensExpression: false };
    } else if (char === '$' && source[index + 1] === '{') {
      return { text, end: index + 2, isWhole: false, opensExpression: true };
    } else {
      text += char;
      index += 1;
    }
  }
  return { text, end: index, isWhole: false, opensExpression: false };
}

/** Where the regular expression starting at `start` ends, or undefined when it is not one. */
function regexEnd(source, start) {
  let inClass = false;
  for (let index = start + 1; index < source.length; index += 1) {
    const char = source[index];
    if (char === '\n') return undefined;
    if (char === '\\') index += 1;
    else if (char === '[') inClass = true;
    else if (char === ']') inClass = false;
    else if (char === '/' && !inClass) {
      const flags = /^[a-z]*/.exec(source.slice(index + 1, index + 17))[0];
      return index + 1 + flags.length;
    }
  }
  return undefined;
}

function main() {
  const scriptDir = dirname(fileURLToPath(import.meta.url));
  const repoRoot = process.argv[2] ?? resolve(scriptDir, '..', '..');
  const { violations, packages, files } = checkLayers(repoRoot);
  const checked = `${packages} package${packages === 1 ? '' : 's'}, ${files} source file${files === 1 ? '' : 's'}`;
  if (violations.length === 0) {
    console.log(`check-layers: OK, ${checked} (${layerDiagram})`);
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
