// The checks on a package's source files: every module a file loads must be a package it may
// use, through that package's public entry point, or a file of its own (or of tooling/).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findImportSpecifiers } from './import-specifiers.mjs';
import { declaredDependencies, scope } from './repository.mjs';

// Build output, installed packages and caches are not our sources.
const skippedFolders = new Set(['node_modules', 'dist', '.turbo', 'coverage']);
const sourceFile = /\.(?:[cm]?[jt]s|[jt]sx)$/;

/** The package's source files under `dir`, sorted; a link to a source file or a folder is reported, not followed. */
export function listSourceFiles(dir, report) {
  const files = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isSymbolicLink()) {
      if (isSourceOrFolderLink(path, entry.name)) {
        report(
          path,
          'is a symbolic link; the layer check does not follow links, so it cannot see what this one reaches',
        );
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

/** Reports each module `file` loads that its package may not load, at the line that loads it. */
export function checkSourceFile(file, workspacePackage, repo, report) {
  const source = readFileSync(file, 'utf8');
  for (const { specifier, line } of findImportSpecifiers(source, file)) {
    for (const message of specifierProblems(specifier, file, workspacePackage, repo)) {
      report(`${file}:${line}`, message);
    }
  }
}

/** What is wrong with one module specifier found in a file of `workspacePackage`. */
export function specifierProblems(specifier, file, workspacePackage, repo) {
  if (specifier.startsWith(scope)) return internalSpecifierProblems(specifier, file, workspacePackage);
  if (isPathSpecifier(specifier)) return pathSpecifierProblems(specifier, file, workspacePackage, repo);
  return [];
}

function internalSpecifierProblems(specifier, file, workspacePackage) {
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
  const { allowance } = workspacePackage;
  if (allowance !== undefined && !allowance.all.has(name)) {
    problems.push(`imports "${name}", ${allowance.because}`);
  } else if (allowance?.seam?.has(name) && !isTestFile(file, workspacePackage.dir)) {
    problems.push(`imports "${name}", ${allowance.belowSeam}`);
  }
  return problems;
}

/** A test, or what only tests load: a `*.test.*` file, or any file under the package's `test/` folder. */
function isTestFile(file, packageDir) {
  return /\.test\.[cm]?[jt]sx?$/.test(file) || relative(packageDir, file).split(sep)[0] === 'test';
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
    return [
      `import "${specifier}" reaches into another package (packages/${otherFolder}); import its public entry point instead`,
    ];
  }
  return [`import "${specifier}" escapes the package folder`];
}

function isInside(folder, path) {
  const fromFolder = relative(folder, path);
  return fromFolder === '' || (fromFolder !== '..' && !fromFolder.startsWith(`..${sep}`) && !isAbsolute(fromFolder));
}
