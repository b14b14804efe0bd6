import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import * as contracts from '@leasehold/contracts';
import { fileOwnership, resolveWorkspace } from '@leasehold/coordination';
import { exportsMissingFromReadme, publicNames, runReadmeExample } from '@leasehold/package-checks';
import { cleanUp, makeTemporaryFolder } from '@leasehold/test-utils';
import * as transport from './index.js';

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));

afterEach(cleanUp);

describe('the public entry point', () => {
  it('exports exactly these names', () => {
    expect(publicNames(PACKAGE)).toEqual([
      'ConnectOptions',
      'ConnectOrStartOptions',
      'Connection',
      'ContractError',
      'ContractErrorCode',
      'DEFAULT_LIMITS',
      'HandOverAccepted',
      'HandOverDecision',
      'HandOverPending',
      'HandOverRequest',
      'LoopbackAddress',
      'OwnerHandlerOptions',
      'OwnerRoutes',
      'OwnerStatusBody',
      'Ownership',
      'OwnershipLease',
      'PrivateFilesHooks',
      'ProvedDeadRecovery',
      'Reply',
      'ServeOptions',
      'ServeOutcome',
      'Serving',
      'StartedProcess',
      'StreamReply',
      'TransportLimits',
      'WaitingOn',
      'addressOf',
      'askHandOver',
      'connect',
      'connectOrStart',
      'endpointOf',
      'fileOwnership',
      'handOverReasonProblem',
      'ownerHandler',
      'readBody',
      'resolveWorkspace',
      'serveOwner',
      'settledInspection',
    ]);
  });

  it('re-exports the objects of the layers below, not copies', () => {
    expect(transport.ContractError).toBe(contracts.ContractError);
    expect(transport.resolveWorkspace).toBe(resolveWorkspace);
    expect(transport.fileOwnership).toBe(fileOwnership);
  });

  it('names every export in the README', () => {
    expect(exportsMissingFromReadme(PACKAGE)).toEqual([]);
  });
});

describe('the README example', () => {
  it('serves the current folder, is proven live, answers its route, stops on request and leaves it stopped', async () => {
    const workspace = makeTemporaryFolder('leasehold-transport-readme-');
    const stateHome = join(makeTemporaryFolder('leasehold-transport-readme-state-'), 'fresh', 'state');
    const run = await runReadmeExample({
      packageDir: PACKAGE,
      cwd: workspace,
      env: { LEASEHOLD_STATE_HOME: stateHome },
    });
    expect(run).toMatchObject({ code: 0, stderr: '' });
    const lines = run.stdout.split('\n');
    const epoch = /^connected: phase idle, epoch ([0-9a-f-]{36})$/.exec(lines[0] ?? '')?.[1];
    expect(epoch).toBeDefined();
    expect(lines.slice(1)).toEqual([
      'GET /hello: 200 {"greeting":"hello"}',
      'POST /v1/stop: 202',
      'stopped (stop): released',
      '',
    ]);
    expect(await fileOwnership({ stateHome }).inspect(workspace)).toMatchObject({ status: 'stopped', epoch });
  });
});
