import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { Backend } from '@leasehold/contracts';
import { cleanUp, codeOf, makeTemporaryFolder, namesIn, pathExists } from '@leasehold/test-utils';
import {
  TEST_ROOT,
  bytesOf,
  failedTransaction,
  makeStateHome,
  reservation,
  writePrivateFile,
} from '../test/helpers.js';
import { ContractError, Registry, backendOf, type RegistryOptions } from './index.js';

afterEach(cleanUp);

const ETCD: Backend = {
  kind: 'etcd',
  endpoints: ['http://10.0.0.5:2379', 'https://10.0.0.6:2379'],
  prefix: '/leasehold/team',
};
const OTHER_PREFIX: Backend = { ...ETCD, prefix: '/leasehold/other' };
const REORDERED: Backend = { ...ETCD, endpoints: ['https://10.0.0.6:2379', 'http://10.0.0.5:2379'] };
const FILES: Backend = { kind: 'files' };

/** The text of a file, or undefined when there is none. */
function textOf(path: string): string | undefined {
  const hex = bytesOf(path);
  return hex === undefined ? undefined : Buffer.from(hex, 'hex').toString('utf8');
}

/** A state home initialised with `backend`. */
async function initialisedWith(backend: Backend): Promise<{ stateHome: string; registry: Registry }> {
  const stateHome = makeStateHome();
  const registry = new Registry(stateHome, { backend });
  await registry.initialize();
  return { stateHome, registry };
}

/** Every name and every file's bytes under the registry folder, to prove nothing was written. */
function registryFiles(registry: Registry): Record<string, string | undefined> {
  const { registry: folder, registryFormat, roots } = registry.layout;
  return {
    names: namesIn(folder).join(','),
    format: bytesOf(registryFormat),
    roots: bytesOf(roots),
    staging: namesIn(registry.layout.staging).join(','),
  };
}

/** The refusal a transaction with `options` meets on `stateHome`, after proving it wrote nothing and left no lock. */
async function refusedTransaction(stateHome: string, options: RegistryOptions): Promise<ContractError> {
  const registry = new Registry(stateHome, options);
  const before = registryFiles(registry);
  let ran = false;
  let caught: unknown;
  try {
    await registry.transaction(TEST_ROOT, () => {
      ran = true;
    });
  } catch (error) {
    caught = error;
  }
  expect(ran).toBe(false);
  expect(registryFiles(registry)).toEqual(before);
  expect(pathExists(registry.layout.registryLock)).toBe(false);
  if (!ContractError.is(caught, 'refused')) throw new Error(`not refused: ${String(caught)}`);
  return caught;
}

describe('a state home of the file backend', () => {
  it('keeps the format document of before backends, byte for byte, with the option given or not', async () => {
    for (const options of [{}, { backend: FILES }]) {
      const stateHome = makeStateHome();
      const registry = new Registry(stateHome, options);
      await registry.transaction(TEST_ROOT, () => undefined);
      expect(textOf(registry.layout.registryFormat)).toBe(
        `{"schema":"leasehold.registry-format/1","stateHome":${JSON.stringify(stateHome)}}`,
      );
      expect(backendOf(stateHome)).toEqual(FILES);
    }
  });

  it('is refused to an etcd backend, naming the backend it records, with nothing written', async () => {
    const stateHome = makeStateHome();
    const row = reservation(stateHome, 1);
    await new Registry(stateHome).transaction(row.root, (transaction) => transaction.reserve(row));
    const error = await refusedTransaction(stateHome, { backend: ETCD });
    expect(error.message).toBe(
      `${stateHome} uses the file backend, not the etcd backend (prefix /leasehold/team on http://10.0.0.5:2379, https://10.0.0.6:2379): open it with that backend`,
    );
    expect(error.path).toBe(new Registry(stateHome).layout.registryFormat);
    expect(new Registry(stateHome).rowOf(row.root).row).toEqual(row);
  });
});

describe('a state home of the etcd backend', () => {
  it('records the backend in format.json, and reads it back', async () => {
    const { stateHome, registry } = await initialisedWith(ETCD);
    expect(JSON.parse(textOf(registry.layout.registryFormat)!)).toEqual({
      schema: 'leasehold.registry-format/1',
      stateHome,
      backend: ETCD,
    });
    expect(backendOf(stateHome)).toEqual(ETCD);
    expect(registry.list().entries).toEqual([]);
  });

  it('takes transactions of the same backend', async () => {
    const { stateHome, registry } = await initialisedWith(ETCD);
    const row = reservation(stateHome, 1);
    await new Registry(stateHome, { backend: { ...ETCD } }).transaction(row.root, (transaction) =>
      transaction.reserve(row),
    );
    expect(registry.rowOf(row.root).row).toEqual(row);
  });

  it.each([
    ['the file backend (the default)', {}, 'the file backend'],
    [
      'another prefix',
      { backend: OTHER_PREFIX },
      'the etcd backend (prefix /leasehold/other on http://10.0.0.5:2379, https://10.0.0.6:2379)',
    ],
    [
      'its endpoints in another order',
      { backend: REORDERED },
      'the etcd backend (prefix /leasehold/team on https://10.0.0.6:2379, http://10.0.0.5:2379)',
    ],
  ] as const)(
    'is refused to %s, naming the backend it records, with nothing written and the lock gone',
    async (_, options, asked) => {
      const { stateHome } = await initialisedWith(ETCD);
      const error = await refusedTransaction(stateHome, options);
      expect(error.message).toBe(
        `${stateHome} uses the etcd backend (prefix /leasehold/team on http://10.0.0.5:2379, https://10.0.0.6:2379), not ${asked}: open it with that backend`,
      );
    },
  );

  it('is refused to another backend when only format.json is there (an interrupted initialisation): roots.json is not made', async () => {
    const { stateHome, registry } = await initialisedWith(ETCD);
    rmSync(registry.layout.roots);
    await refusedTransaction(stateHome, {});
    expect(pathExists(registry.layout.roots)).toBe(false);
    await registry.initialize();
    expect(registry.list().entries).toEqual([]);
  });
});

describe('initialize', () => {
  it('makes format.json and roots.json and nothing else, and is idempotent', async () => {
    const { stateHome, registry } = await initialisedWith(ETCD);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    const before = registryFiles(registry);
    await registry.initialize();
    await new Registry(stateHome, { backend: ETCD }).initialize();
    expect(registryFiles(registry)).toEqual(before);
  });

  it('leaves the rows of a state home in use as they are', async () => {
    const stateHome = makeStateHome();
    const registry = new Registry(stateHome);
    const row = reservation(stateHome, 1);
    await registry.transaction(row.root, (transaction) => transaction.reserve(row));
    const before = registryFiles(registry);
    await registry.initialize();
    expect(registryFiles(registry)).toEqual(before);
  });

  it('is refused for a state home that records another backend', async () => {
    const { stateHome, registry } = await initialisedWith(ETCD);
    const before = registryFiles(registry);
    await expect(new Registry(stateHome).initialize()).rejects.toMatchObject({ code: 'refused' });
    await expect(new Registry(stateHome, { backend: OTHER_PREFIX }).initialize()).rejects.toMatchObject({
      code: 'refused',
    });
    expect(registryFiles(registry)).toEqual(before);
  });
});

describe('backendOf', () => {
  it('answers undefined before format.json exists, and makes nothing', () => {
    const base = makeTemporaryFolder('registry-backend-');
    expect(backendOf(`${base}/fresh/state`)).toBeUndefined();
    expect(namesIn(base)).toEqual([]);
  });

  it('answers undefined for a state home without a registry yet', async () => {
    const stateHome = makeStateHome();
    const registry = new Registry(stateHome);
    await registry.transaction(TEST_ROOT, () => undefined);
    rmSync(registry.layout.registry, { recursive: true });
    expect(backendOf(stateHome)).toBeUndefined();
  });

  it('refuses a path that is not absolute and normalised', () => {
    expect(codeOf(() => backendOf('relative/state'))).toBe('refused');
  });
});

describe('an invalid backend', () => {
  const invalid: readonly [string, unknown][] = [
    ['an unknown kind', { kind: 'zookeeper' }],
    ['a files backend with a key', { kind: 'files', prefix: '/x' }],
    ['no endpoints', { kind: 'etcd', endpoints: [], prefix: '/x' }],
    ['an endpoint with a credential', { kind: 'etcd', endpoints: ['http://user:secret@10.0.0.5:2379'], prefix: '/x' }],
    ['a prefix with a trailing slash', { kind: 'etcd', endpoints: ['http://10.0.0.5:2379'], prefix: '/x/' }],
    ['a credential beside it', { kind: 'etcd', endpoints: ['http://10.0.0.5:2379'], prefix: '/x', password: 'secret' }],
  ];

  it.each(invalid)(
    'in format.json (%s) is refused to every reader and writer, and the file stays',
    async (_, backend) => {
      const { stateHome, registry } = await initialisedWith(ETCD);
      writePrivateFile(
        registry.layout.registryFormat,
        JSON.stringify({ backend, schema: 'leasehold.registry-format/1', stateHome }),
      );
      const before = registryFiles(registry);
      expect(codeOf(() => backendOf(stateHome))).toBe('refused');
      expect(codeOf(() => registry.list())).toBe('refused');
      expect(await failedTransaction(registry, TEST_ROOT)).toEqual({ code: 'refused', ran: false });
      expect(await failedTransaction(new Registry(stateHome), TEST_ROOT)).toEqual({ code: 'refused', ran: false });
      expect(registryFiles(registry)).toEqual(before);
      expect(pathExists(registry.layout.registryLock)).toBe(false);
    },
  );

  it.each(invalid)('as the option (%s) is refused at construction, naming no secret', (_, backend) => {
    let caught: unknown;
    try {
      new Registry(makeStateHome(), { backend: backend as Backend });
    } catch (error) {
      caught = error;
    }
    expect(ContractError.is(caught, 'refused')).toBe(true);
    expect((caught as ContractError).message).not.toContain('secret');
  });

  it('whose format document would pass DOCUMENT_BYTES is refused at construction', () => {
    const endpoints = Array.from({ length: 16 }, (_, index) => `http://${'h'.repeat(1000)}${index}:2379`);
    expect(codeOf(() => new Registry(makeStateHome(), { backend: { kind: 'etcd', endpoints, prefix: '/x' } }))).toBe(
      'refused',
    );
  });
});
