import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { exportsMissingFromReadme, publicNames, runReadmeExample } from '@leasehold/package-checks';
import { cleanUp, makeTemporaryFolder, pathExists } from '@leasehold/test-utils';

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));

afterEach(cleanUp);

describe('the public entry point', () => {
  it("exports exactly main and MainIO: opening a state home is @leasehold/state-home's", () => {
    expect(publicNames(PACKAGE)).toEqual(['MainIO', 'main']);
  });

  it('names every export in the README', () => {
    expect(exportsMissingFromReadme(PACKAGE)).toEqual([]);
  });
});

describe('the README example', () => {
  it('runs status --json in-process on a folder no owner served: absent, exit 3, and creates nothing', async () => {
    const workspace = makeTemporaryFolder('leasehold-cli-readme-');
    const stateHome = join(makeTemporaryFolder('leasehold-cli-readme-state-'), 'fresh', 'state');
    const run = await runReadmeExample({
      packageDir: PACKAGE,
      cwd: workspace,
      env: { LEASEHOLD_STATE_HOME: stateHome },
    });
    expect(run).toEqual({ code: 0, stdout: 'status: absent, exit 3\n', stderr: '' });
    expect(pathExists(join(stateHome, '..'))).toBe(false);
  });
});
