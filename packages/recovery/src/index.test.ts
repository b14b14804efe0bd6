import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import * as contracts from '@leasehold/contracts';
import * as coordination from '@leasehold/coordination';
import { exportsMissingFromReadme, publicNames, runReadmeExample } from '@leasehold/package-checks';
import { cleanUp, makeTemporaryFolder, pathExists } from '@leasehold/test-utils';
import * as recovery from './index.js';

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));

afterEach(cleanUp);

describe('the public entry point', () => {
  it('exports exactly these names', () => {
    expect(publicNames(PACKAGE)).toEqual([
      'Backend',
      'ContractError',
      'ContractErrorCode',
      'DiagnoseOptions',
      'FINDING_KINDS',
      'Finding',
      'FindingKind',
      'FindingRemedy',
      'Holder',
      'Phase',
      'PrivateFilesHooks',
      'ProcessGone',
      'Recovery',
      'RecoveryFenceView',
      'RecoveryHolderView',
      'RecoveryJournalEntry',
      'RecoveryOptions',
      'RecoveryResult',
      'RecoveryView',
      'ViewHolders',
      'defaultStateHome',
      'diagnose',
      'fileRecovery',
      'outlivingProgram',
      'resolveWorkspace',
      'rootExists',
    ]);
  });

  it('re-exports the objects of the layers below, not copies', () => {
    expect(recovery.ContractError).toBe(contracts.ContractError);
    expect(recovery.resolveWorkspace).toBe(coordination.resolveWorkspace);
    expect(recovery.defaultStateHome).toBe(coordination.defaultStateHome);
  });

  it('names every export in the README', () => {
    expect(exportsMissingFromReadme(PACKAGE)).toEqual([]);
  });
});

describe('the README example', () => {
  it('reviews a workspace of a fresh state home, finds nothing to recover or diagnose, and creates nothing', async () => {
    const workspace = makeTemporaryFolder('leasehold-recovery-readme-');
    const stateHome = join(makeTemporaryFolder('leasehold-recovery-readme-state-'), 'fresh', 'state');
    const run = await runReadmeExample({
      packageDir: PACKAGE,
      cwd: workspace,
      env: { LEASEHOLD_STATE_HOME: stateHome },
    });
    const { digest } = await recovery.fileRecovery({ stateHome }).view(workspace);
    expect(run).toEqual({
      code: 0,
      stdout: `fences: 0, digest: ${digest}\nnothing to recover (clear)\nfindings: 0\n`,
      stderr: '',
    });
    expect(pathExists(join(stateHome, '..'))).toBe(false);
  });
});
