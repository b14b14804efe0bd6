import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { stateHomeLayout, type Backend } from '@leasehold/contracts';
import { Registry, backendOf } from '@leasehold/registry';
import { cleanUp, makeTemporaryFolder, makeWorkspace, pathExists } from '@leasehold/test-utils';
import { ContractError, StateHomeError, openStateHome, type OpenBackend } from './index.js';

const opened: OpenBackend[] = [];

afterEach(async () => {
  await Promise.all(opened.splice(0).map((backend) => backend.close()));
  await cleanUp();
});

/** Opens `stateHome` as it records, and closes it after the test. */
async function open(stateHome: string, env: NodeJS.ProcessEnv = {}): Promise<OpenBackend> {
  const backend = await openStateHome(stateHome, { env });
  opened.push(backend);
  return backend;
}

/** What `opening` rejected with. */
async function refusalOf(opening: () => Promise<unknown>): Promise<unknown> {
  return opening().then(
    () => expect.unreachable('it opened'),
    (error: unknown) => error,
  );
}

/** A state home of its own, in a temp folder: `home` is not made yet. */
function place(): { base: string; home: string } {
  const base = makeTemporaryFolder('leasehold-state-home-');
  return { base, home: join(base, 'state') };
}

/** Nothing listens there: opening the etcd backend must not reach it. */
const ETCD: Backend = { kind: 'etcd', endpoints: ['http://127.0.0.1:1'], prefix: '/leasehold/state-home-test' };

/** A state home that records `ETCD`, as `leasehold init` leaves it (recording reaches no cluster). */
async function etcdStateHome(): Promise<{ base: string; home: string }> {
  const at = place();
  await new Registry(at.home, { backend: ETCD }).initialize();
  return at;
}

describe('a state home on the file backend', () => {
  it('opens one that records no backend, even one not made yet, on the file backend, and creates nothing', async () => {
    const { base, home } = place();
    const backend = await open(home);
    expect(backend).toMatchObject({ stateHome: home, backend: { kind: 'files' } });
    expect(backend).not.toHaveProperty('host');
    expect(await backend.ownership.list()).toEqual([]);
    expect(await backend.ownership.inspect(makeWorkspace({ base }, 'ws'))).toEqual({ status: 'absent' });
    expect(pathExists(home)).toBe(false);
  });

  it("opens the file backend one records, whose ownership and recovery are that state home's", async () => {
    const { base, home } = place();
    await new Registry(home, { backend: { kind: 'files' } }).initialize();
    const backend = await open(home);
    expect(backend.backend).toEqual({ kind: 'files' });
    expect(backend.ownership).toMatchObject({ stateHome: home, backend: { kind: 'files' } });
    expect(await backend.recovery.view(makeWorkspace({ base }, 'ws'))).toMatchObject({ clear: true, fences: [] });
  });

  it('opens one whose format document cannot be read on the file backend, which then refuses to work on it, naming the file', async () => {
    const { home } = place();
    const format = stateHomeLayout(home).registryFormat;
    mkdirSync(dirname(format), { recursive: true, mode: 0o700 });
    writeFileSync(format, 'not a format document', { mode: 0o600 });
    const backend = await open(home);
    expect(backend.backend).toEqual({ kind: 'files' });
    await expect(backend.ownership.list()).rejects.toMatchObject({
      code: 'refused',
      message: expect.stringContaining(format),
    });
  });

  it.each(['relative/state', '/state/../home', '/state/home/'])(
    'refuses the state home %s: not an absolute, normalised path',
    async (home) => {
      const error = await refusalOf(() => openStateHome(home));
      expect(ContractError.is(error, 'refused')).toBe(true);
      expect(StateHomeError.is(error)).toBe(false);
    },
  );
});

describe('a state home that records etcd', () => {
  it("opens the etcd backend over this host's files, as LEASEHOLD_HOST names this host, and reaches etcd only on first use", async () => {
    const { home } = await etcdStateHome();
    const backend = await open(home, { LEASEHOLD_HOST: 'host-a' });
    expect(backend).toMatchObject({ stateHome: home, backend: ETCD, host: 'host-a' });
    // One object is both seams, over this state home's own files.
    expect(backend.recovery).toBe(backend.ownership);
    expect(backend.ownership).toMatchObject({ stateHome: home, backend: ETCD });
  });

  it('names this host by its host name when LEASEHOLD_HOST is not set', async () => {
    const { home } = await etcdStateHome();
    expect((await open(home)).host).toBe(hostname());
  });
});

// The password, and a path standing for each PEM file: no message may carry a value.
const PASSWORD = 'secret-Pw-5e1f0a';
const READABLE = 'readable.pem';
const MISSING = 'missing.pem';

describe("this host's etcd setup, read from the environment before etcd is loaded or reached: each mistake is a StateHomeError with its remedy", () => {
  it.each([
    {
      set: { LEASEHOLD_ETCD_USER: 'alice' },
      remedyKind: 'set-both-or-neither',
      variables: ['LEASEHOLD_ETCD_USER', 'LEASEHOLD_ETCD_PASSWORD'],
    },
    {
      set: { LEASEHOLD_ETCD_PASSWORD: PASSWORD },
      remedyKind: 'set-both-or-neither',
      variables: ['LEASEHOLD_ETCD_USER', 'LEASEHOLD_ETCD_PASSWORD'],
    },
    {
      set: { LEASEHOLD_ETCD_CA: READABLE, LEASEHOLD_ETCD_CERT: READABLE },
      remedyKind: 'set-both-or-neither',
      variables: ['LEASEHOLD_ETCD_CERT', 'LEASEHOLD_ETCD_KEY'],
    },
    {
      set: { LEASEHOLD_ETCD_CA: READABLE, LEASEHOLD_ETCD_KEY: READABLE },
      remedyKind: 'set-both-or-neither',
      variables: ['LEASEHOLD_ETCD_CERT', 'LEASEHOLD_ETCD_KEY'],
    },
    {
      set: { LEASEHOLD_ETCD_CERT: READABLE, LEASEHOLD_ETCD_KEY: READABLE },
      remedyKind: 'set-also',
      variables: ['LEASEHOLD_ETCD_CA'],
    },
    { set: { LEASEHOLD_ETCD_CA: MISSING }, remedyKind: 'readable-file', variables: ['LEASEHOLD_ETCD_CA'] },
    {
      set: { LEASEHOLD_ETCD_CA: READABLE, LEASEHOLD_ETCD_CERT: MISSING, LEASEHOLD_ETCD_KEY: READABLE },
      remedyKind: 'readable-file',
      variables: ['LEASEHOLD_ETCD_CERT'],
    },
    {
      set: { LEASEHOLD_ETCD_CA: READABLE, LEASEHOLD_ETCD_CERT: READABLE, LEASEHOLD_ETCD_KEY: MISSING },
      remedyKind: 'readable-file',
      variables: ['LEASEHOLD_ETCD_KEY'],
    },
  ])('$set: $remedyKind $variables', async ({ set, remedyKind, variables }) => {
    const { base, home } = await etcdStateHome();
    const readable = join(base, READABLE);
    writeFileSync(readable, '-----BEGIN CERTIFICATE-----\n', { mode: 0o600 });
    const env = Object.fromEntries(
      Object.entries(set).map(([name, value]) => [
        name,
        value === READABLE ? readable : value === MISSING ? join(base, MISSING) : value,
      ]),
    );
    const error = await refusalOf(() => openStateHome(home, { env }));
    if (!StateHomeError.is(error)) throw error;
    expect(error).toMatchObject({
      code: 'refused',
      remedyKind,
      variables,
      remedy: expect.stringContaining(variables[0]!),
    });
    expect(ContractError.is(error, 'refused')).toBe(true);
    // A file that cannot be read is named, as the error's path; no value of a variable is ever in the message.
    if (remedyKind === 'readable-file') expect(error.path).toBe(join(base, MISSING));
    expect(error.message).not.toContain(PASSWORD);
    expect(error.message).not.toContain('alice');
    // The state home still records etcd: nothing in it changed.
    expect(backendOf(home)).toEqual(ETCD);
  });
});

/** This package's dependencies that it runs with, each resolved from here, by its folder. */
function installedFolderOf(name: string): string {
  return dirname(fileURLToPath(import.meta.resolve(`${name}/package.json`)));
}

/** Opens a state home of the files, then one that records etcd, in a child process that imports this package by name. */
const WITHOUT_ETCD_SCRIPT = `
const plan = JSON.parse(process.argv[2]);
const { StateHomeError, openStateHome } = await import('@leasehold/state-home');
const files = await openStateHome(plan.files, { env: {} });
const served = await files.ownership.list();
await files.close();
console.log(JSON.stringify({ files: files.backend.kind, served: served.length }));
try {
  await openStateHome(plan.etcd, { env: {} });
} catch (error) {
  console.log(JSON.stringify({ is: StateHomeError.is(error), code: error.code, remedyKind: error.remedyKind, remedy: error.remedy, variables: error.variables, message: error.message }));
}
`;

describe('where @leasehold/etcd is missing (a bundle that keeps it external, and a deployment without it)', () => {
  it('opens a state home of the files, which never loads it, and refuses one that records etcd with install-etcd', async () => {
    // This package and its dependencies but @leasehold/etcd: a copy of the built package (a link would resolve
    // from this folder, where the workspace installed etcd), and links to the others.
    const project = makeTemporaryFolder('leasehold-state-home-no-etcd-');
    const installed = join(project, 'node_modules', '@leasehold', 'state-home');
    const self = fileURLToPath(new URL('..', import.meta.url));
    cpSync(join(self, 'package.json'), join(installed, 'package.json'));
    cpSync(join(self, 'dist'), join(installed, 'dist'), { recursive: true });
    for (const name of ['contracts', 'coordination', 'private-files', 'recovery', 'registry']) {
      symlinkSync(installedFolderOf(`@leasehold/${name}`), join(project, 'node_modules', '@leasehold', name));
    }
    const script = join(project, 'open.mjs');
    writeFileSync(script, WITHOUT_ETCD_SCRIPT);
    const plan = { files: place().home, etcd: (await etcdStateHome()).home };

    const { stdout, stderr } = await promisify(execFile)(process.execPath, [script, JSON.stringify(plan)], {
      cwd: project,
      encoding: 'utf8',
    });

    expect(stderr).toBe('');
    expect(
      stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as unknown),
    ).toEqual([
      { files: 'files', served: 0 },
      {
        is: true,
        code: 'refused',
        remedyKind: 'install-etcd',
        remedy:
          'install @leasehold/etcd beside @leasehold/state-home (for the leasehold command: install @leasehold/cli again, with its dependencies, @leasehold/etcd among them)',
        variables: [],
        message: 'this state home records etcd, and @leasehold/etcd is not installed where it is loaded from',
      },
    ]);
  });
});
