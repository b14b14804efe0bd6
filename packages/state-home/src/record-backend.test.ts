import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stateHomeLayout, type Backend } from '@leasehold/contracts';
import { backendOf } from '@leasehold/registry';
import { cleanUp, etcdAvailable, makeTemporaryFolder, pathExists, startEtcd, treeOf } from '@leasehold/test-utils';
import { ContractError, StateHomeError, openStateHome, recordBackend } from './index.js';

afterEach(async () => {
  await cleanUp();
});

/** A state home of its own, in a temp folder, not made yet. */
function home(): string {
  return join(makeTemporaryFolder('leasehold-record-'), 'state');
}

/** What `action` rejected with. */
async function rejectionOf(action: () => Promise<unknown>): Promise<unknown> {
  return action().then(
    () => expect.unreachable('it was recorded'),
    (error: unknown) => error,
  );
}

/** Nothing listens there. */
const SILENT: Backend = { kind: 'etcd', endpoints: ['http://127.0.0.1:1'], prefix: '/leasehold/record-test' };

describe('recording the backend of a state home', () => {
  // A lock is taken and removed each time, so only folder times may change.
  it('records the file backend, and again without change', async () => {
    const stateHome = home();
    await recordBackend(stateHome, { kind: 'files' });
    const tree = treeOf(stateHome, { folderTimes: false });
    await recordBackend(stateHome, { kind: 'files' });
    expect(backendOf(stateHome)).toEqual({ kind: 'files' });
    expect(treeOf(stateHome, { folderTimes: false })).toEqual(tree);
  });

  it('records nothing for an etcd that does not answer, over a state home that records files too', async () => {
    const stateHome = home();
    await recordBackend(stateHome, { kind: 'files' });
    const tree = treeOf(stateHome, { folderTimes: false });
    const error = await rejectionOf(() => recordBackend(stateHome, SILENT, { env: { LEASEHOLD_HOST: 'host-a' } }));
    expect(ContractError.is(error, 'unavailable')).toBe(true);
    expect(treeOf(stateHome, { folderTimes: false })).toEqual(tree);
  });

  it('tells a half-set credential before reaching etcd, and records nothing', async () => {
    const stateHome = home();
    const error = await rejectionOf(() => recordBackend(stateHome, SILENT, { env: { LEASEHOLD_ETCD_USER: 'u' } }));
    expect(StateHomeError.is(error) && [error.remedyKind, error.remedy]).toEqual([
      'set-both-or-neither',
      'export both LEASEHOLD_ETCD_USER and LEASEHOLD_ETCD_PASSWORD, or unset both',
    ]);
    expect(pathExists(stateHome)).toBe(false);
  });
});

describe.skipIf(!etcdAvailable())('recording etcd, on a real etcd', () => {
  it('records an etcd that answers, which the state home then opens; the file backend is then refused with the format document as path', async () => {
    const cluster = await startEtcd({ members: 1 });
    const stateHome = home();
    const backend: Backend = { kind: 'etcd', endpoints: [...cluster.endpoints], prefix: '/leasehold/record-test' };
    await recordBackend(stateHome, backend, { env: { LEASEHOLD_HOST: 'host-a' } });
    expect(backendOf(stateHome)).toEqual(backend);
    const opened = await openStateHome(stateHome, { env: { LEASEHOLD_HOST: 'host-a' } });
    await opened.close();
    expect(opened.backend).toEqual(backend);
    const tree = treeOf(stateHome, { folderTimes: false });
    const error = await rejectionOf(() => recordBackend(stateHome, { kind: 'files' }));
    expect(ContractError.is(error, 'refused') && error.path).toBe(stateHomeLayout(stateHome).registryFormat);
    expect(treeOf(stateHome, { folderTimes: false })).toEqual(tree);
  });
});
