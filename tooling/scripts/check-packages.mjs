#!/usr/bin/env node
// The packed-tarball check: every public package as a downstream team takes
// it. Each is packed (`pnpm pack`, so `workspace:^` becomes a real range and
// the prepack guard runs), then installed ALONE, with only the dependencies
// it declares, into a fresh project outside the monorepo, once with npm and
// once with pnpm's strict layout (where an undeclared import fails). There it
// must: run its README example as an ES module, load with `require()` (Node's
// require of ESM), type-check its README example under TypeScript's
// `nodenext` and `bundler` resolution and a `.cts` that requires it, each
// with the oldest TypeScript the README promises. A package with a command
// runs it from `node_modules/.bin`: `--version`, and `status` on a state home
// of each backend (the etcd one loads the etcd package from outside the
// command's bundle).
//
// Usage: node tooling/scripts/check-packages.mjs [repoRoot]   (after `pnpm build`)
// Prints a line per package and check, then each tarball's size and files;
// exits 1 when anything failed.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exampleAsModule, readmeExample } from '@leasehold/package-checks';
import { cleanUp, etcdAvailable, startEtcd } from '@leasehold/test-utils';

// The oldest TypeScript each promise is made for (see the README's
// Requirements): `import` from 5.4, a `.cts` that `require`s us from 5.8
// (the first to type `require` of an ES module under `module: nodenext`).
const TYPESCRIPT_FLOORS = { esm: '5.4.5', cts: '5.8.3' };

const NPM_INSTALL = ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];

const INSTALLERS = {
  npm: ['npm', NPM_INSTALL],
  pnpm: ['pnpm', ['install', '--prefer-offline', '--reporter=silent', '--config.confirmModulesPurge=false']],
};

/** Every public (not private) package of `packages/`, with its folder and manifest. */
export function publicPackages(root) {
  const folder = join(root, 'packages');
  return readdirSync(folder)
    .map((name) => join(folder, name))
    .filter((dir) => statSync(join(dir, 'package.json'), { throwIfNoEntry: false }) !== undefined)
    .map((dir) => ({ dir, manifest: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) }))
    .filter(({ manifest }) => manifest.private !== true);
}

/** What must be in a published tarball and what must never be: an empty list when it is right. */
export function tarballProblems(dir, files) {
  const problems = [];
  for (const wanted of ['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts']) {
    if (!files.includes(wanted)) problems.push(`${wanted} is missing`);
  }
  if (statSync(join(dir, 'CHANGELOG.md'), { throwIfNoEntry: false }) !== undefined && !files.includes('CHANGELOG.md')) {
    problems.push('CHANGELOG.md is missing');
  }
  for (const file of files)
    if (/(^|\/)(test|fixtures)\/|\.test\.[cm]?[jt]s(\.map)?$/.test(file)) problems.push(`${file} is a test file`);
  return problems;
}

/** Packs `dir` into `destination`: the tarball's path, its size in bytes and the files it holds. */
function pack(dir, destination) {
  const output = execFileSync('pnpm', ['pack', '--json', '--pack-destination', destination], {
    cwd: dir,
    encoding: 'utf8',
  });
  const report = JSON.parse(output.slice(output.indexOf('\n{') + 1));
  return {
    tarball: report.filename,
    bytes: statSync(report.filename).size,
    files: report.files.map((file) => file.path),
  };
}

/**
 * A fresh project that depends on `name` only. Every Leasehold package maps
 * to its tarball (npm `overrides`, pnpm `pnpm.overrides`): the ranges the
 * tarballs declare are not on the registry yet, and a layer must come from
 * this build, not from anywhere else.
 */
function consumerProject(folder, name, tarballs) {
  mkdirSync(folder, { recursive: true });
  const local = Object.fromEntries(Object.entries(tarballs).map(([pkg, file]) => [pkg, `file:${file}`]));
  const manifest = {
    name: 'consumer',
    private: true,
    type: 'module',
    dependencies: { [name]: local[name] },
    overrides: local,
    pnpm: { overrides: local },
  };
  writeFileSync(join(folder, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

/** Installs each TypeScript floor once: the path of each one's `tsc`. */
function typescriptFloors(scratch) {
  const compilers = {};
  for (const [use, version] of Object.entries(TYPESCRIPT_FLOORS)) {
    const folder = join(scratch, `typescript-${version}`);
    mkdirSync(folder, { recursive: true });
    execFileSync('npm', [...NPM_INSTALL, '--prefix', folder, `typescript@${version}`], { stdio: 'pipe' });
    compilers[use] = join(folder, 'node_modules', 'typescript', 'bin', 'tsc');
  }
  return compilers;
}

/** The checks, each a name and a function that throws with what went wrong. */
function checksFor(project, name, root, runFolder, compilers) {
  const installed = join(project, 'node_modules', name);
  const example = readmeExample(join(installed, 'README.md'));
  writeFileSync(join(project, 'example.ts'), example);
  writeFileSync(join(project, 'example.mjs'), exampleAsModule(example));
  writeFileSync(
    join(project, 'required.cjs'),
    `const api = require(${JSON.stringify(name)});\nif (Object.keys(api).length === 0) throw new Error('require() gave no exports');\n`,
  );
  writeFileSync(
    join(project, 'required.cts'),
    `import api = require(${JSON.stringify(name)});\nexport const names: string[] = Object.keys(api);\n`,
  );
  const types = ['--types', 'node', '--typeRoots', join(root, 'node_modules', '@types')];
  const strict = ['--noEmit', '--strict', '--target', 'es2022', '--lib', 'es2022', '--skipLibCheck', 'false', ...types];
  const state = join(runFolder, 'fresh', 'state');
  // A check answers nothing when it passed, or why it was skipped; it throws when it failed.
  const run = (command, args, options = {}) => {
    execFileSync(command, args, { cwd: project, encoding: 'utf8', stdio: 'pipe', ...options });
  };
  const runExample = (env) =>
    run(process.execPath, [join(project, 'example.mjs')], {
      cwd: runFolder,
      env: { ...process.env, LEASEHOLD_STATE_HOME: state, ...env },
    });
  const commands = Object.keys(JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')).bin ?? {});
  return [
    ...commands.map((command) => [
      `the ${command} command`,
      () => runCommand(join(project, 'node_modules', '.bin', command), runFolder),
    ]),
    ['README example (ESM)', () => (needsEtcd(example) ? withEtcd(runExample) : runExample({}))],
    ['require()', () => run(process.execPath, ['required.cjs'])],
    [
      `tsc ${TYPESCRIPT_FLOORS.esm} nodenext`,
      () =>
        run(process.execPath, [
          compilers.esm,
          ...strict,
          '--module',
          'nodenext',
          '--moduleResolution',
          'nodenext',
          'example.ts',
        ]),
    ],
    [
      `tsc ${TYPESCRIPT_FLOORS.esm} bundler`,
      () =>
        run(process.execPath, [
          compilers.esm,
          ...strict,
          '--module',
          'esnext',
          '--moduleResolution',
          'bundler',
          'example.ts',
        ]),
    ],
    [
      `tsc ${TYPESCRIPT_FLOORS.cts} .cts nodenext`,
      () =>
        run(process.execPath, [
          compilers.cts,
          ...strict,
          '--module',
          'nodenext',
          '--moduleResolution',
          'nodenext',
          'required.cts',
        ]),
    ],
  ];
}

/**
 * The installed command as a user first meets it: `--version`, then `status` of a workspace never
 * served, on a state home of its files and on one `init` gave an etcd cluster (exit 3, `absent`).
 */
function runCommand(command, runFolder) {
  const workspace = join(runFolder, 'command-workspace');
  mkdirSync(workspace);
  const absent = (stateHome, env = {}) => {
    const result = spawnSync(command, ['status', '--json', '--workspace', workspace, '--state-home', stateHome], {
      encoding: 'utf8',
      env: { ...process.env, ...env },
    });
    if (result.status !== 3 || !result.stdout.includes('"absent"'))
      throw new Error(`status: exit ${result.status}: ${result.stdout}${result.stderr}`);
  };
  execFileSync(command, ['--version'], { encoding: 'utf8', stdio: 'pipe' });
  absent(join(runFolder, 'command-files'));
  return withEtcd((env) => {
    const stateHome = join(runFolder, 'command-etcd');
    const host = { LEASEHOLD_HOST: 'check' };
    execFileSync(
      command,
      ['init', '--state-home', stateHome, '--etcd-endpoints', env[ETCD_ENDPOINTS], '--etcd-prefix', '/check'],
      { encoding: 'utf8', stdio: 'pipe', env: { ...process.env, ...host } },
    );
    absent(stateHome, host);
  });
}

/** An example that talks to etcd reads its endpoints from this variable (the etcd package's README says so). */
const ETCD_ENDPOINTS = 'LEASEHOLD_ETCD_ENDPOINTS';

function needsEtcd(example) {
  return example.includes(ETCD_ENDPOINTS);
}

/**
 * Runs `runExample` (given the etcd endpoints as `LEASEHOLD_ETCD_ENDPOINTS`)
 * against a fresh single-node etcd of its own, so no run sees another's
 * keys. Without an etcd binary it is skipped, said plainly, except under
 * CI=true, where `etcdAvailable` throws and the check fails.
 */
async function withEtcd(runExample) {
  if (!etcdAvailable()) return 'skipped: no etcd on PATH';
  const etcd = await startEtcd({ members: 1 });
  try {
    runExample({ [ETCD_ENDPOINTS]: etcd.endpoints.join(',') });
  } finally {
    await etcd.stop();
  }
  return undefined;
}

function failureText(error) {
  const parts = [error.stdout, error.stderr].filter((part) => typeof part === 'string' && part.trim() !== '');
  return (parts.length > 0 ? parts.join('\n') : String(error.message)).trim().split('\n').slice(0, 12).join('\n      ');
}

async function main(root) {
  const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'leasehold-check-packages-')));
  let failures = 0;
  try {
    const packages = publicPackages(root);
    const packed = [];
    for (const { dir, manifest } of packages) {
      try {
        packed.push({ dir, name: manifest.name, ...pack(dir, join(scratch, 'tarballs')) });
      } catch (error) {
        failures += 1;
        console.log(`FAIL ${manifest.name}: pack\n      ${failureText(error)}`);
      }
    }
    if (failures > 0) {
      console.log(`check-packages: ${failures} failed to pack`);
      return 1;
    }
    const compilers = typescriptFloors(scratch);
    const tarballs = Object.fromEntries(packed.map(({ name, tarball }) => [name, tarball]));
    for (const { dir, name, files } of packed) {
      for (const problem of tarballProblems(dir, files)) {
        failures += 1;
        console.log(`FAIL ${name} tarball: ${problem}`);
      }
    }
    for (const [installer, [command, args]] of Object.entries(INSTALLERS)) {
      for (const { name } of packed) {
        const project = join(scratch, installer, name.replace('/', '+'));
        consumerProject(project, name, tarballs);
        try {
          execFileSync(command, args, { cwd: project, encoding: 'utf8', stdio: 'pipe' });
        } catch (error) {
          failures += 1;
          console.log(`FAIL ${name} (${installer}): install\n      ${failureText(error)}`);
          continue;
        }
        const runFolder = realpathSync(mkdtempSync(join(scratch, 'run-')));
        let checks;
        try {
          checks = checksFor(project, name, root, runFolder, compilers);
        } catch (error) {
          failures += 1;
          console.log(`FAIL ${name} (${installer}): ${error.message}`);
          continue;
        }
        for (const [check, runCheck] of checks) {
          try {
            const skipped = await runCheck();
            console.log(
              `${skipped === undefined ? 'ok  ' : 'skip'} ${name} (${installer}): ${check}${skipped === undefined ? '' : ` (${skipped})`}`,
            );
          } catch (error) {
            failures += 1;
            console.log(`FAIL ${name} (${installer}): ${check}\n      ${failureText(error)}`);
          }
        }
      }
    }
    for (const { name, bytes, files } of packed)
      console.log(`tarball ${name}: ${(bytes / 1024).toFixed(1)} KiB, ${files.length} files`);
  } finally {
    await cleanUp();
    rmSync(scratch, { recursive: true, force: true });
  }
  console.log(failures === 0 ? 'check-packages: OK' : `check-packages: ${failures} failed`);
  return failures === 0 ? 0 : 1;
}

if (resolve(process.argv[1] ?? '') === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(resolve(process.argv[2] ?? join(fileURLToPath(import.meta.url), '..', '..', '..')));
}
