#!/usr/bin/env node
// A local npm registry (Verdaccio, a root devDependency) holding this build's
// public packages, published exactly as `pnpm release` publishes them:
// `changeset publish` (so `pnpm publish` per public package: the prepack
// guard, `workspace:^` made real ranges, the `files` list, no private
// package), only its registry is this one. `@leasehold/*` is served from its
// throwaway storage alone and never looked up upstream; every other package
// (zod, etcd3, ...) is proxied to Verdaccio's default upstream, so an install
// from it gets what a user's install gets.
//
// `startLocalRegistry(root)` is what the package check uses; run as a script
// (`pnpm registry`, after a build) it prints the line a user pastes in their
// own project and serves until Ctrl-C. Either way Verdaccio runs in a child
// process (the check blocks its own event loop on every install), on
// 127.0.0.1 and a port the system picked, with its storage in a temp folder;
// stopping removes both, and the child also ends and removes the folder when
// the process that started it dies, however it dies (its IPC channel closes).
//
// Usage: node tooling/scripts/local-registry.mjs [repoRoot]
import { execFile, fork } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const SERVE = '--serve-verdaccio';

/** The registry's storage, auth and package rules: ours from storage only, the rest proxied upstream. */
async function verdaccioConfig(folder) {
  const { getDefaultConfig } = await import('verdaccio');
  // Verdaccio's own default upstream, the one its default configuration names: no address is written here.
  const { uplinks } = getDefaultConfig();
  const [upstream] = Object.keys(uplinks);
  return {
    self_path: join(folder, 'config.yaml'),
    storage: join(folder, 'storage'),
    // No accounts: anyone on this host may read and publish, and nobody may sign up.
    auth: { htpasswd: { file: join(folder, 'htpasswd'), max_users: -1 } },
    uplinks,
    packages: {
      '@leasehold/*': { access: '$all', publish: '$all', unpublish: '$all' },
      '**': { access: '$all', proxy: upstream },
    },
    web: { enable: false },
    log: { type: 'stdout', format: 'pretty', level: 'warn' },
  };
}

/** The child: Verdaccio on 127.0.0.1, on a port the system picks, told to the parent; ends with it. */
async function serveVerdaccio(folder) {
  const { runServer } = await import('verdaccio');
  const server = await runServer(await verdaccioConfig(folder));
  const end = () => {
    server.close();
    rmSync(folder, { recursive: true, force: true });
    process.exit(0);
  };
  process.on('disconnect', end);
  process.on('SIGTERM', end);
  process.on('SIGINT', end);
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
}

/** Starts Verdaccio in a child process: its URL once it listens, and how to stop it. */
async function startVerdaccio(folder) {
  const log = join(folder, 'verdaccio.log');
  const logFd = openSync(log, 'a');
  const child = fork(fileURLToPath(import.meta.url), [SERVE, folder], { stdio: ['ignore', logFd, logFd, 'ipc'] });
  closeSync(logFd);
  const exited = new Promise((resolveExit) => child.once('exit', resolveExit));
  const port = await new Promise((resolvePort, reject) => {
    const ended = (code) =>
      reject(new Error(`Verdaccio ended (exit ${code}) before it listened:\n${readFileSync(log, 'utf8')}`));
    child.once('exit', ended);
    child.once('message', ({ port: listening }) => {
      child.off('exit', ended);
      resolvePort(listening);
    });
  });
  return {
    url: `http://127.0.0.1:${port}/`,
    log,
    stop: async () => {
      if (child.connected) child.disconnect();
      await exited;
    },
  };
}

/**
 * Runs `changeset publish` against the registry at `url`: its registry and a token for it (Verdaccio
 * lets anyone publish `@leasehold/*`, but npm and pnpm send nothing without one) in a scratch npmrc,
 * and no git tags, since this is no release.
 */
async function publishTo(url, root, folder) {
  const npmrc = join(folder, 'npmrc');
  writeFileSync(npmrc, `registry=${url}\n${url.replace(/^http:/, '')}:_authToken=local-registry\n`);
  const env = { ...process.env, npm_config_registry: url, npm_config_userconfig: npmrc, NPM_CONFIG_USERCONFIG: npmrc };
  try {
    await promisify(execFile)('pnpm', ['exec', 'changeset', 'publish', '--no-git-tag'], {
      cwd: root,
      env,
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (error) {
    throw new Error(`changeset publish to ${url} failed:\n${error.stdout ?? ''}${error.stderr ?? error.message}`);
  }
}

/**
 * A local registry holding the public packages of `root` as `pnpm release` publishes them (after a
 * build): its URL (ends in `/`), and `stop()`, which ends it and removes its storage.
 */
export async function startLocalRegistry(root) {
  const folder = realpathSync(mkdtempSync(join(tmpdir(), 'leasehold-registry-')));
  let verdaccio;
  try {
    verdaccio = await startVerdaccio(folder);
    await publishTo(verdaccio.url, root, folder);
  } catch (error) {
    await verdaccio?.stop();
    rmSync(folder, { recursive: true, force: true });
    throw error;
  }
  return {
    url: verdaccio.url,
    stop: async () => {
      await verdaccio.stop();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

/** `pnpm registry`: the packages published, the line to paste, then serving until Ctrl-C. */
async function main(root) {
  const registry = await startLocalRegistry(root);
  const { name } = JSON.parse(readFileSync(join(root, 'packages', 'cli', 'package.json'), 'utf8'));
  console.log(`A local registry with this build's public packages. In your project, run:\n`);
  console.log(`  npm install --registry ${registry.url} ${name}\n`);
  console.log('(any other @leasehold package the same way). Ctrl-C stops it and removes it.');
  const stop = () => registry.stop().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  process.once('SIGHUP', stop);
}

const self = fileURLToPath(import.meta.url);
if (process.argv[2] === SERVE) await serveVerdaccio(process.argv[3]);
else if (resolve(process.argv[1] ?? '') === self) await main(resolve(process.argv[2] ?? join(self, '..', '..', '..')));
