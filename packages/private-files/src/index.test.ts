import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { exportsMissingFromReadme, publicNames, runReadmeExample } from '@leasehold/package-checks';
import { cleanUp, makeTemporaryFolder, modeOf } from '@leasehold/test-utils';

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));

afterEach(cleanUp);

describe('the public entry point', () => {
  it('exports exactly these names, values and types', () => {
    expect(publicNames(PACKAGE)).toEqual([
      'ContractError',
      'ContractErrorCode',
      'EntryType',
      'FileOperation',
      'FileSnapshot',
      'FileSystem',
      'FileSystemVerification',
      'FolderMarks',
      'HeldFile',
      'HolderDocument',
      'HolderFiles',
      'HolderFilesOptions',
      'HolderJudgement',
      'MarkSnapshot',
      'MutationAction',
      'MutationOperation',
      'MutationStep',
      'OwnerStatus',
      'PrivateFiles',
      'PrivateFilesHooks',
      'PrivateFilesOptions',
      'ProcessDetails',
      'ProcessIdentity',
      'PublishOptions',
      'STAGING_FOLDER',
      'StagingEntry',
      'StagingSweep',
      'SystemError',
      'UnsafeEntry',
      'UnsafeEntryError',
      'VerifyFileSystemOptions',
      'currentProcess',
      'describeHolder',
      'describeUser',
      'entryTypeBreach',
      'errnoOf',
      'fileOperation',
      'fileSystemOf',
      'isErrno',
      'isSystemError',
      'ownerStatus',
      'ownershipBreaches',
      'processDetails',
      'processIdentity',
      'retryingReads',
      'sameSnapshot',
      'setupErrnoMeaning',
      'verifyFileSystem',
      'verifyFileSystemWorker',
    ]);
  });

  it('names every export in the README', () => {
    expect(exportsMissingFromReadme(PACKAGE)).toEqual([]);
  });

  it('runs the README example as printed, from an empty folder, making its root there', async () => {
    const cwd = makeTemporaryFolder('pf-example-');
    const stateHome = join(makeTemporaryFolder('pf-example-home-'), 'fresh', 'state');
    const run = await runReadmeExample({ packageDir: PACKAGE, cwd, env: { LEASEHOLD_STATE_HOME: stateHome } });
    expect(run).toEqual({
      code: 0,
      stdout: ['before: absent', 'replaced: {"epoch":2}', 'conflict on locks/owner.json; now: {"epoch":2}', ''].join(
        '\n',
      ),
      stderr: '',
    });
    expect([modeOf(join(cwd, 'app-state')), modeOf(join(cwd, 'app-state', 'locks', 'owner.json'))]).toEqual([
      0o700, 0o600,
    ]);
  });
});
