#!/usr/bin/env node
// The published-package check: every public package as a downstream team
// takes it, from a registry. A local registry (`local-registry.mjs`:
// Verdaccio, on 127.0.0.1) is given this build's public packages by
// `changeset publish`, exactly as `pnpm release` publishes them (`pnpm
// publish` per package: the prepack guard, `workspace:^` made real ranges,
// the `files` list, no private package). Each published tarball must hold
// what a user needs and no more, at the size its README says. Then each
// package is installed ALONE into an empty project whose `.npmrc` names only
// that registry (`npm install @leasehold/x`, and `pnpm add @leasehold/x`,
// whose strict layout fails an undeclared import), so its own dependencies
// come as a user's would: ours from the registry, the rest proxied upstream.
// There it must: run its README example as an ES module, load with
// `require()` (Node's require of ESM), type-check its README example under
// TypeScript's `nodenext` and `bundler` resolution and a `.cts` that requires
// it, each with the oldest TypeScript the README promises. A package with a
// command runs it: `npx <command> --version`, and `status` on a state home
// of each backend (the etcd one loads the etcd package from outside the
// command's bundle). The transport README's daemon and client run in a
// project that installed what that README says, and the daemon is stopped.
//
// Installing from hand-listed tarballs (overrides mapping every package to
// its `pnpm pack`) is gone: the registry installs what a user installs, with
// nothing listed, and checks the publish step too, so one path is kept.
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
import { codeBlocks, exampleAsModule, markdownSection, readmeExample } from '@leasehold/package-checks';
import { cleanUp, etcdAvailable, startEtcd, untilGone } from '@leasehold/test-utils';
import { startLocalRegistry } from './local-registry.mjs';

// The oldest TypeScript each promise is made for (see the README's
// Requirements): `import` from 5.4, a `.cts` that `require`s us from 5.8
// (the first to type `require` of an ES module under `module: nodenext`).
const TYPESCRIPT_FLOORS = { esm: '5.4.5', cts: '5.8.3' };

const NPM_INSTALL = ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];

/**
 * How a user adds packages with each installer. A local registry's build may
 * publish another tarball under a version it published before, so npm
 * revalidates what it cached (`--prefer-online`) and pnpm keeps its metadata
 * for this run only; their stores are content-addressed and stay shared.
 */
const INSTALLERS = {
  npm: (names) => ['npm', ['install', '--no-audit', '--no-fund', '--prefer-online', '--loglevel=error', ...names]],
  pnpm: (names, scratch) => [
    'pnpm',
    ['add', '--reporter=silent', `--config.cache-dir=${join(scratch, 'pnpm-cache')}`, ...names],
  ],
};

/** What a tarball may hold: the built code and its types, the README, the CHANGELOG, the LICENSE and the manifest. */
const FOR_USERS = /^(package\.json|README\.md|CHANGELOG\.md|LICENSE|dist\/.+\.(js|cjs|d\.ts))$/;

/** How a package README states its tarball's size (in its Install section); the check keeps it within 10 %. */
const SIZE_LINE = /The published tarball is ([0-9.]+) KiB/;

/** Every public (not private) package of `packages/`, with its folder and manifest. */
export function publicPackages(root) {
  return workspacePackages(root).filter(({ manifest }) => manifest.private !== true);
}

function workspacePackages(root) {
  const folder = join(root, 'packages');
  return readdirSync(folder)
    .map((name) => join(folder, name))
    .filter((dir) => statSync(join(dir, 'package.json'), { throwIfNoEntry: false }) !== undefined)
    .map((dir) => ({ dir, manifest: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) }));
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
  for (const file of files) {
    if (/(^|\/)(test|fixtures)\/|\.test\.[cm]?[jt]s(\.map)?$/.test(file)) problems.push(`${file} is a test file`);
    else if (!FOR_USERS.test(file))
      problems.push(
        `${file} is not for users (only dist's .js and .d.ts, the README, CHANGELOG, LICENSE and package.json)`,
      );
  }
  return problems;
}

/** Whether `readme` states a tarball of `bytes` within 10 %: undefined when it does, else what to write. */
export function sizeProblem(readme, bytes) {
  const kib = (bytes / 1024).toFixed(1);
  const said = SIZE_LINE.exec(readme)?.[1];
  if (said === undefined)
    return `its README does not say its size: add "The published tarball is ${kib} KiB." to its Install section`;
  if (Math.abs(Number(said) * 1024 - bytes) > bytes / 10)
    return `its README says ${said} KiB, the published tarball is ${kib} KiB: write ${kib}`;
  return undefined;
}

/** Where the registry answers what it knows of `name` (a scoped name's slash escaped, as npm asks). */
function packumentUrl(registry, name) {
  return new URL(name.replace('/', '%2f'), registry);
}

/** The tarball the registry serves for `name`'s latest version: its size in bytes and the files it holds. */
async function publishedTarball(registry, name) {
  const packument = await (await fetch(packumentUrl(registry, name))).json();
  const { tarball } = packument.versions[packument['dist-tags'].latest].dist;
  const bytes = Buffer.from(await (await fetch(tarball)).arrayBuffer());
  const listing = execFileSync('tar', ['-tz'], { input: bytes, encoding: 'utf8' });
  const files = listing
    .split('\n')
    .filter((entry) => entry !== '' && !entry.endsWith('/'))
    .map((entry) => entry.replace(/^package\//, ''));
  return { bytes: bytes.length, files };
}

/** Whether the registry answers `name` at all (a private package must be unknown to it). */
async function onRegistry(registry, name) {
  return (await fetch(packumentUrl(registry, name))).ok;
}

/**
 * An empty project (no dependency listed) whose `.npmrc` names the local
 * registry alone, with `names` then added by `installer` as a user adds them.
 * Our `npm_config_*` variables (`npm run` sets its whole configuration,
 * registry included) are left out, so the project's `.npmrc` is what both
 * installers follow.
 */
function installedProject(folder, installer, names, registry, scratch) {
  mkdirSync(folder, { recursive: true });
  writeFileSync(
    join(folder, 'package.json'),
    `${JSON.stringify({ name: 'consumer', private: true, type: 'module' }, null, 2)}\n`,
  );
  writeFileSync(join(folder, '.npmrc'), `registry=${registry}\n`);
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_config_/i.test(key)));
  const [command, args] = INSTALLERS[installer](names, scratch);
  execFileSync(command, args, { cwd: folder, encoding: 'utf8', stdio: 'pipe', env });
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
    ...commands.map((command) => [`the ${command} command`, () => runCommand(project, installed, command, runFolder)]),
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
 * The installed command as a user first meets it: `npx <command> --version` (the version installed),
 * then `status` of a workspace never served, on a state home of its files and on one `init` gave an
 * etcd cluster (exit 3, `absent`).
 */
function runCommand(project, installed, name, runFolder) {
  const { version } = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
  const printed = execFileSync('npx', [name, '--version'], { cwd: project, encoding: 'utf8', stdio: 'pipe' });
  if (printed.trim() !== version) throw new Error(`npx ${name} --version printed ${printed.trim()}, not ${version}`);
  const command = join(project, 'node_modules', '.bin', name);
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

/** The transport README's section with the daemon a team ships and its client. */
const DAEMON_SECTION = '## A daemon to ship, and its client';

/** That section's daemon and client, as printed, and the packages its `npm install` line names. */
function readmeDaemon(readmePath) {
  const section = markdownSection(readFileSync(readmePath, 'utf8'), DAEMON_SECTION);
  const [daemon, client] = codeBlocks(section, 'ts');
  const install = /`npm install ([^`]+)`/.exec(section)?.[1];
  if (daemon === undefined || client === undefined || install === undefined)
    throw new Error(`${readmePath}: "${DAEMON_SECTION}" wants an npm install line, a daemon and a client`);
  return { daemon, client, names: install.split(' ') };
}

// Stops the README's daemon the way `leasehold stop` does, with the packages that project installed: the
// authenticated stop request. Prints the daemon's pid, so that the check waits until it is gone.
const STOP_DAEMON = `import { defaultStateHome, openStateHome } from '@leasehold/state-home';
import { connect, resolveWorkspace } from '@leasehold/transport';

const home = await openStateHome(defaultStateHome());
try {
  const owner = await connect(resolveWorkspace(process.cwd()), { ownership: home.ownership });
  const stop = await owner.request('POST', '/v1/stop');
  if (stop.status !== 202) throw new Error(\`POST /v1/stop: \${stop.status}\`);
  console.log(owner.status.pid);
} finally {
  await home.close();
}
`;

/**
 * The transport README's daemon and client, saved as it says in a project that installed the
 * packages it names (the project's folder is the workspace): the client starts the daemon and gets 200 from
 * its route; then the daemon is stopped, and gone, and says it stopped.
 */
async function runReadmeDaemon(project, { daemon, client }, runFolder) {
  writeFileSync(join(project, 'hello-daemon.mjs'), daemon);
  writeFileSync(join(project, 'hello-client.mjs'), client);
  writeFileSync(join(project, 'stop-daemon.mjs'), STOP_DAEMON);
  const options = {
    cwd: project,
    encoding: 'utf8',
    stdio: 'pipe',
    env: { ...process.env, LEASEHOLD_STATE_HOME: join(runFolder, 'daemon-state') },
  };
  // The daemon outlives the client, so it is stopped whatever the client did; a daemon that never
  // started cannot be, and then what the client said is the failure.
  let failure;
  let hello = '';
  try {
    hello = execFileSync(process.execPath, ['hello-client.mjs'], options);
  } catch (error) {
    failure = error;
  }
  try {
    await untilGone(Number(execFileSync(process.execPath, ['stop-daemon.mjs'], options)));
  } catch (error) {
    failure ??= error;
  }
  if (failure !== undefined) throw failure;
  if (!/^GET \/hello: 200, from the owner of epoch \S+$/m.test(hello))
    throw new Error(`hello-client.mjs printed: ${hello}`);
  const log = readFileSync(join(project, 'hello-daemon.log'), 'utf8');
  if (!log.includes('stopped (stop)')) throw new Error(`hello-daemon.log: ${log}`);
}

function failureText(error) {
  const parts = [error.stdout, error.stderr].filter((part) => typeof part === 'string' && part.trim() !== '');
  return (parts.length > 0 ? parts.join('\n') : String(error.message)).trim().split('\n').slice(0, 12).join('\n      ');
}

/** Runs each check, printing a line for each: the number that failed. */
async function runChecks(label, checks) {
  let failures = 0;
  for (const [check, runCheck] of checks) {
    try {
      const skipped = await runCheck();
      console.log(
        `${skipped === undefined ? 'ok  ' : 'skip'} ${label}: ${check}${skipped === undefined ? '' : ` (${skipped})`}`,
      );
    } catch (error) {
      failures += 1;
      console.log(`FAIL ${label}: ${check}\n      ${failureText(error)}`);
    }
  }
  return failures;
}

/** The published tarballs: each holds what it must, at the size its README says; no private package is there. */
async function publishedChecks(root, registry) {
  const tarballs = [];
  const checks = [];
  for (const { dir, manifest } of publicPackages(root)) {
    checks.push([
      `${manifest.name} tarball`,
      async () => {
        const tarball = await publishedTarball(registry, manifest.name);
        tarballs.push({ name: manifest.name, ...tarball });
        const problems = tarballProblems(dir, tarball.files);
        const size = sizeProblem(readFileSync(join(dir, 'README.md'), 'utf8'), tarball.bytes);
        if (size !== undefined) problems.push(size);
        if (problems.length > 0) throw new Error(problems.join('\n'));
      },
    ]);
  }
  const unlisted = workspacePackages(root).filter(({ manifest }) => manifest.private === true);
  checks.push([
    'no private package published',
    async () => {
      for (const { manifest } of unlisted)
        if (await onRegistry(registry, manifest.name)) throw new Error(`${manifest.name} is on the registry`);
    },
  ]);
  return { failures: await runChecks('registry', checks), tarballs };
}

/** Each public package installed alone with `installer`, and used; then the transport README's daemon. */
async function installedChecks(root, registry, installer, scratch, compilers) {
  let failures = 0;
  for (const { manifest } of publicPackages(root)) {
    const { name } = manifest;
    const label = `${name} (${installer})`;
    const project = join(scratch, installer, name.replace('/', '+'));
    const runFolder = realpathSync(mkdtempSync(join(scratch, 'run-')));
    const install = () => installedProject(project, installer, [name], registry, scratch);
    const installFailures = await runChecks(label, [
      [`${installer} ${installer === 'npm' ? 'install' : 'add'} ${name}`, install],
    ]);
    failures += installFailures;
    if (installFailures > 0) continue;
    let checks;
    try {
      checks = checksFor(project, name, root, runFolder, compilers);
    } catch (error) {
      failures += 1;
      console.log(`FAIL ${label}: ${error.message}`);
      continue;
    }
    if (name === '@leasehold/transport') {
      checks.push([
        'README daemon and client',
        async () => {
          const readme = readmeDaemon(join(project, 'node_modules', name, 'README.md'));
          const daemonProject = join(scratch, installer, 'readme-daemon');
          installedProject(daemonProject, installer, readme.names, registry, scratch);
          await runReadmeDaemon(daemonProject, readme, runFolder);
        },
      ]);
    }
    failures += await runChecks(label, checks);
  }
  return failures;
}

async function main(root) {
  const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'leasehold-check-packages-')));
  let failures = 0;
  let registry;
  try {
    try {
      registry = await startLocalRegistry(root);
    } catch (error) {
      console.log(`FAIL publish to a local registry\n      ${failureText(error)}`);
      return 1;
    }
    console.log(`ok   registry: changeset publish to ${registry.url}`);
    const published = await publishedChecks(root, registry.url);
    failures += published.failures;
    const compilers = typescriptFloors(scratch);
    for (const installer of Object.keys(INSTALLERS))
      failures += await installedChecks(root, registry.url, installer, scratch, compilers);
    for (const { name, bytes, files } of published.tarballs)
      console.log(`tarball ${name}: ${(bytes / 1024).toFixed(1)} KiB, ${files.length} files`);
  } finally {
    await registry?.stop();
    await cleanUp();
    rmSync(scratch, { recursive: true, force: true });
  }
  console.log(failures === 0 ? 'check-packages: OK' : `check-packages: ${failures} failed`);
  return failures === 0 ? 0 : 1;
}

if (resolve(process.argv[1] ?? '') === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(resolve(process.argv[2] ?? join(fileURLToPath(import.meta.url), '..', '..', '..')));
}
