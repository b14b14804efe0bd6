import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import * as contracts from '@leasehold/contracts';
import { defaultStateHome, resolveWorkspace } from '@leasehold/coordination';
import * as privateFiles from '@leasehold/private-files';
import { rootsOverlap } from '@leasehold/registry';
import { exportsMissingFromReadme, publicNames, runReadmeExample } from '@leasehold/package-checks';
import { cleanUp, makeTemporaryFolder, pathExists } from '@leasehold/test-utils';
import * as stateHome from './index.js';

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));

afterEach(cleanUp);

describe('the public entry point', () => {
  it('exports exactly these names', () => {
    expect(publicNames(PACKAGE)).toEqual([
      'Backend',
      'ContractError',
      'ContractErrorCode',
      'FileSystem',
      'FileSystemAllowance',
      'FileSystemJudgement',
      'FileSystemVerification',
      'OpenBackend',
      'OpenOptions',
      'Ownership',
      'Recovery',
      'StateHomeError',
      'StateHomeRemedy',
      'SystemError',
      'VerifyFileSystemOptions',
      'allowanceOf',
      'defaultStateHome',
      'describeHolder',
      'errnoOf',
      'fileSystemOf',
      'isErrno',
      'isSystemError',
      'openStateHome',
      'recordBackend',
      'resolveWorkspace',
      'rootsOverlap',
      'stateHomeFileSystem',
      'verifyFileSystem',
      'verifyFileSystemWorker',
    ]);
  });

  it('re-exports the objects of the layers below, not copies', () => {
    expect(stateHome.ContractError).toBe(contracts.ContractError);
    expect(stateHome.defaultStateHome).toBe(defaultStateHome);
    expect(stateHome.resolveWorkspace).toBe(resolveWorkspace);
    expect(stateHome.rootsOverlap).toBe(rootsOverlap);
    for (const name of [
      'describeHolder',
      'errnoOf',
      'fileSystemOf',
      'isErrno',
      'isSystemError',
      'verifyFileSystem',
      'verifyFileSystemWorker',
    ] as const)
      expect(stateHome[name]).toBe(privateFiles[name]);
  });

  it('names every export in the README', () => {
    expect(exportsMissingFromReadme(PACKAGE)).toEqual([]);
  });
});

describe('the README example', () => {
  it('opens a state home nobody used on the file backend, lists nothing served, and creates nothing', async () => {
    const home = join(makeTemporaryFolder('leasehold-state-home-readme-'), 'fresh', 'state');
    const run = await runReadmeExample({ packageDir: PACKAGE, env: { LEASEHOLD_STATE_HOME: home } });
    expect(run).toEqual({ code: 0, stdout: 'files backend: 0 served\n', stderr: '' });
    expect(pathExists(join(home, '..'))).toBe(false);
  });
});
