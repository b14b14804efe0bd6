import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { exportsMissingFromReadme, publicNames, runReadmeExample } from '@leasehold/package-checks';
import { cleanUp, etcdAvailable, makeTemporaryFolder, startEtcd } from '@leasehold/test-utils';

afterEach(cleanUp);

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));

describe('the public entry point', () => {
  it('exports exactly these names, values and types', () => {
    expect(publicNames(PACKAGE)).toEqual([
      'Backend',
      'ContractError',
      'ContractErrorCode',
      'DEFAULT_REQUEST_TIMEOUT_MS',
      'DEFAULT_TTL_SECONDS',
      'EtcdAuth',
      'EtcdBackend',
      'EtcdBackendLease',
      'EtcdBackendOptions',
      'EtcdFencingGate',
      'EtcdFencingGateOptions',
      'EtcdTls',
      'FencedOperation',
      'FileFencingGate',
      'Ownership',
      'OwnershipLease',
      'Recovery',
      'Sequencer',
      'etcdBackend',
    ]);
  });

  it('names every export in the README', () => {
    expect(exportsMissingFromReadme(PACKAGE)).toEqual([]);
  });

  it.skipIf(!etcdAvailable())(
    'runs the README example as printed, against a real etcd named by LEASEHOLD_ETCD_ENDPOINTS',
    async () => {
      const cluster = await startEtcd({ members: 1 });
      const cwd = makeTemporaryFolder('etcd-readme-cwd-');
      const run = await runReadmeExample({
        packageDir: PACKAGE,
        cwd,
        env: { LEASEHOLD_ETCD_ENDPOINTS: cluster.endpoints.join(',') },
      });
      expect(run).toEqual({
        code: 0,
        stdout: ['both owners wrote, in turn', "the older owner's late write: conflict", ''].join('\n'),
        stderr: '',
      });
    },
  );
});
