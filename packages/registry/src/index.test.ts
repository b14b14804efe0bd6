import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { exportsMissingFromReadme, publicNames, runReadmeExample } from '@leasehold/package-checks';
import { cleanUp, makeTemporaryFolder, modeOf } from '@leasehold/test-utils';

afterEach(cleanUp);

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));

describe('the public entry point', () => {
  it('exports exactly these names, values and types', () => {
    expect(publicNames(PACKAGE)).toEqual([
      'Backend',
      'ContractError',
      'ContractErrorCode',
      'DEFAULT_LOCK_WAIT_MS',
      'FileSnapshot',
      'FileSystemAllowance',
      'FileSystemJudgement',
      'GuardedWriter',
      'MutationAction',
      'MutationOperation',
      'MutationStep',
      'OwnerStatus',
      'PrivateFilesHooks',
      'ProcessIdentity',
      'PublishOptions',
      'REGISTRY_BYTES',
      'REGISTRY_ENTRIES',
      'Registry',
      'RegistryLock',
      'RegistryLockState',
      'RegistryOptions',
      'RegistryTransaction',
      'RegistryView',
      'Reservation',
      'RowRead',
      'allowanceOf',
      'backendOf',
      'currentProcess',
      'ensureStateHome',
      'ownerStatus',
      'retryingReads',
      'rootsOverlap',
      'stateHomeFileSystem',
    ]);
  });

  it('names every export in the README', () => {
    expect(exportsMissingFromReadme(PACKAGE)).toEqual([]);
  });

  it('runs the README example as printed, in a state home whose parent does not exist yet', async () => {
    const cwd = makeTemporaryFolder('registry-readme-cwd-');
    const stateHome = join(makeTemporaryFolder('registry-readme-'), 'fresh', 'state');
    const run = await runReadmeExample({ packageDir: PACKAGE, cwd, env: { LEASEHOLD_STATE_HOME: stateHome } });
    expect(run).toEqual({
      code: 0,
      stdout: [`reserved ${cwd}, held by a live process`, 'rows in the table: 1', 'after unreserve: no row', ''].join(
        '\n',
      ),
      stderr: '',
    });
    expect(modeOf(stateHome)).toBe(0o700);
  });
});
