import { describe, expect, it } from 'vitest';
import * as contracts from './index.js';
import { ContractError, DOCUMENT_BYTES, decodeBytes, encode, ownerLockSchema, type OwnerLock } from './index.js';

describe('the public entry point', () => {
  it('exports exactly the documented API', () => {
    expect(Object.keys(contracts).sort()).toEqual(
      [
        'CONTRACT_ERROR_CODES',
        'ContractError',
        'DOCUMENT_BYTES',
        'FENCE_KINDS',
        'MAX_DEPTH',
        'PATHS_DOCUMENT_BYTES',
        'PHASES',
        'RECOVERY_RECORD_FENCES',
        'REGISTRY_BYTES',
        'REGISTRY_ENTRIES',
        'absolutePath',
        'anyPortEndpoint',
        'capabilityToken',
        'checkoutLockSchema',
        'decode',
        'decodeBytes',
        'encode',
        'endpoint',
        'fenceSchema',
        'hash',
        'holderSchema',
        'host',
        'id',
        'localCapabilitySchema',
        'ownerConfigSchema',
        'ownerLockSchema',
        'parse',
        'pid',
        'processStart',
        'recoveryRecordSchema',
        'registrationSchema',
        'registryFormatSchema',
        'registryLockSchema',
        'registrySchema',
        'reservationSchema',
        'safeDecode',
        'serviceFormatSchema',
        'sha256',
        'text',
      ].sort(),
    );
    expect(contracts.MAX_DEPTH).toBe(64);
  });

  it('runs the README example', () => {
    const read = (bytes: Uint8Array): OwnerLock | 'refused' => {
      try {
        return decodeBytes(ownerLockSchema, bytes, DOCUMENT_BYTES, 'owner.lock');
      } catch (error) {
        if (ContractError.is(error, 'refused')) return 'refused';
        throw error;
      }
    };
    const lock: OwnerLock = {
      schema: 'leasehold.owner-lock/1',
      epoch: '0f8fad5b-d9cb-469f-a165-70867728950e',
      token: '7c9e6679-7425-40de-944b-e07fc1f90ae7',
      pid: 4242,
      host: 'build-01',
    };
    expect(read(encode(lock))).toEqual(lock);
    expect(read(new TextEncoder().encode('{"schema":"leasehold.owner-lock/1"}'))).toBe('refused');
  });
});
