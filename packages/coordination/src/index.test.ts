import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { exportsMissingFromReadme, publicNames, runReadmeExample } from '@leasehold/package-checks';
import { cleanUp, makeTemporaryFolder, modeOf } from '@leasehold/test-utils';

afterEach(cleanUp);

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));

/** What the README example prints for a workspace at `root`. */
const exampleOutput = (root: string) =>
  [`owner of ${root}: phase idle`, 'clients now see: stopping', 'after release: stopped', ''].join('\n');

describe('the public entry point', () => {
  it('exports exactly these names, values and types', () => {
    expect(publicNames(PACKAGE)).toEqual([
      'Backend',
      'Checkout',
      'CheckoutHandle',
      'CheckoutHolder',
      'CheckoutLock',
      'Companion',
      'ContractError',
      'ContractErrorCode',
      'CoordinationOptions',
      'DecodedFile',
      'Document',
      'FileLease',
      'FileSnapshot',
      'FileSnapshots',
      'HeldFences',
      'Inspection',
      'ListedOwner',
      'LocalAccess',
      'LocalCapability',
      'MutationAction',
      'MutationOperation',
      'MutationStep',
      'NewWorkspace',
      'OwnerConfig',
      'OwnerLock',
      'OwnerStatus',
      'OwnerSummary',
      'Ownership',
      'OwnershipLease',
      'Phase',
      'PrivateFiles',
      'PrivateFilesHooks',
      'Registration',
      'Registry',
      'Releaser',
      'Reservation',
      'SERVICE_FILES',
      'ServiceFile',
      'ServiceFormat',
      'ServiceState',
      'Workspace',
      'acquireWorkspace',
      'assertFiles',
      'defaultStateHome',
      'fileOwnership',
      'initializeWorkspace',
      'inspectWorkspace',
      'openWorkspace',
      'readServiceFile',
      'readServiceState',
      'recoveringStateHome',
      'releaseInOrder',
      'resolveWorkspace',
      'snapshotsOf',
      'workspaceConfiguration',
      'workspaceLocalAccess',
    ]);
  });

  it('names every export in the README', () => {
    expect(exportsMissingFromReadme(PACKAGE)).toEqual([]);
  });

  it('runs the README example as printed, in a state home whose parent does not exist yet', async () => {
    const cwd = makeTemporaryFolder('coordination-readme-cwd-');
    const stateHome = join(makeTemporaryFolder('coordination-readme-'), 'fresh', 'state');
    const run = await runReadmeExample({ packageDir: PACKAGE, cwd, env: { LEASEHOLD_STATE_HOME: stateHome } });
    expect(run).toEqual({ code: 0, stdout: exampleOutput(cwd), stderr: '' });
    expect(modeOf(stateHome)).toBe(0o700);
  });

  it('runs it on a fresh machine too: no state variable, and a home folder without ~/.local/state', async () => {
    const cwd = makeTemporaryFolder('coordination-readme-cwd-');
    const home = join(makeTemporaryFolder('coordination-readme-'), 'home');
    const run = await runReadmeExample({
      packageDir: PACKAGE,
      cwd,
      env: { HOME: home, LEASEHOLD_STATE_HOME: '', XDG_STATE_HOME: '' },
    });
    expect(run).toEqual({ code: 0, stdout: exampleOutput(cwd), stderr: '' });
    expect(modeOf(join(home, '.local', 'state', 'leasehold'))).toBe(0o700);
  });
});
