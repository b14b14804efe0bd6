import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { exportsMissingFromReadme, publicNames, runReadmeExample } from '@leasehold/package-checks';

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));

describe('the public entry point', () => {
  it('exports exactly these names, values and types', () => {
    expect(publicNames(PACKAGE)).toEqual([
      'AcquireRequest',
      'AutomaticRecovery',
      'Backend',
      'CONTRACT_ERROR_CODES',
      'CheckoutLock',
      'Companion',
      'ContractError',
      'ContractErrorCode',
      'ContractErrorOptions',
      'DOCUMENT_BYTES',
      'DecodeResult',
      'FENCE_KINDS',
      'Fence',
      'FenceKind',
      'FencedProcess',
      'Holder',
      'Inspection',
      'ListedOwner',
      'LocalAccess',
      'LocalCapability',
      'MAX_DEPTH',
      'NewWorkspace',
      'OwnerConfig',
      'OwnerLock',
      'OwnerSummary',
      'Ownership',
      'OwnershipLease',
      'PATHS_DOCUMENT_BYTES',
      'PHASES',
      'Phase',
      'ProvedDeadRecovery',
      'RECOVERY_RECORD_FENCES',
      'REGISTRY_BYTES',
      'REGISTRY_ENTRIES',
      'RecoverRequest',
      'Recovery',
      'RecoveryFenceView',
      'RecoveryHolderView',
      'RecoveryJournalEntry',
      'RecoveryRecord',
      'RecoveryResult',
      'RecoveryView',
      'Registration',
      'RegistryFormat',
      'RegistryLock',
      'Reservation',
      'ReservationTable',
      'ServiceFormat',
      'absolutePath',
      'anyPortEndpoint',
      'automaticRecoverySchema',
      'backendSchema',
      'capabilityToken',
      'checkoutLockSchema',
      'companionSchema',
      'decode',
      'decodeBytes',
      'describeBackend',
      'encode',
      'endpoint',
      'etcdEndpoint',
      'etcdPrefix',
      'fenceSchema',
      'hash',
      'holderSchema',
      'holdersNotProvedGone',
      'host',
      'id',
      'localCapabilitySchema',
      'ownerConfigSchema',
      'ownerLockSchema',
      'parse',
      'pid',
      'placeOptions',
      'processStart',
      'recoverProvedDead',
      'recoverRemedy',
      'recoveryRecordSchema',
      'registrationSchema',
      'registryFormatSchema',
      'registryLockSchema',
      'reservationSchema',
      'reservationTableSchema',
      'safeDecode',
      'sameBackend',
      'serviceFormatSchema',
      'sha256',
      'shellQuote',
      'text',
    ]);
  });

  it('names every export in the README', () => {
    expect(exportsMissingFromReadme(PACKAGE)).toEqual([]);
  });

  it('runs the README example as printed', async () => {
    const epoch = '0f8fad5b-d9cb-469f-a165-70867728950e';
    const run = await runReadmeExample({ packageDir: PACKAGE });
    expect(run).toEqual({
      code: 0,
      stdout: [
        `{"epoch":"${epoch}","host":"build-01","pid":4242,"schema":"leasehold.owner-lock/1","token":"7c9e6679-7425-40de-944b-e07fc1f90ae7"}`,
        `epoch ${epoch}, pid 4242`,
        'owner.lock: missing key $.epoch; missing key $.token; missing key $.pid (and 1 more)',
        'owner.lock: duplicate key at $.pid (offset 14)',
        'owner.lock: wrong type at $.pid',
        '',
      ].join('\n'),
      stderr: '',
    });
  });
});
