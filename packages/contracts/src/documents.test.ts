import { inspect } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { codeOf, refusal } from '../test/helpers.js';
import { decode, encode, parse, safeDecode } from './codec.js';
import { ContractError } from './contract-error.js';
import {
  DOCUMENT_BYTES,
  FENCE_KINDS,
  PATHS_DOCUMENT_BYTES,
  PHASES,
  RECOVERY_RECORD_FENCES,
  REGISTRY_BYTES,
  REGISTRY_ENTRIES,
  checkoutLockSchema,
  companionSchema,
  localCapabilitySchema,
  ownerConfigSchema,
  ownerLockSchema,
  recoveryRecordSchema,
  registrationSchema,
  claimSchema,
  registryFormatSchema,
  registryLockSchema,
  reservationSchema,
  reservationTableSchema,
  serviceFormatSchema,
  type Fence,
  type Reservation,
} from './documents.js';
import { formatPath } from './json-path.js';
import { backendSchema, type Backend } from './backend.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

function setOwn(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A shallow copy of `object` without `key`. */
function without(object: object, key: string): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...object };
  delete copy[key];
  return copy;
}

/** A deep copy through the codec, so a mutation never reaches the generated value. */
function copyOf(value: unknown): Json {
  return parse(encode(value), REGISTRY_BYTES) as Json;
}

// ---------------------------------------------------------------------------
// Valid samples and arbitraries of every document.

const ID_A = '0f8fad5b-d9cb-469f-a165-70867728950e';
const ID_B = '7c9e6679-7425-40de-944b-e07fc1f90ae7';
const ID_C = 'c56a4180-65aa-42ec-a945-5fd21dec0538';
const HASH_A = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const HASH_B = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';
const CAPABILITY = 'q1ZTx6Kk0kYcGm4mJ8m6oWvLQm1Yt0p7Vb3dQ2n4s-_';

const reservationSample: Reservation = {
  root: '/home/ada/project',
  stateHome: '/home/ada/.local/state/leasehold',
  configIdentity: HASH_A,
  endpoint: 'http://127.0.0.1:4100',
  epoch: ID_A,
  pid: 4242,
  host: 'build-01',
  processStart: 'boot:1 ns:4026531836 start:123456',
  ownerToken: ID_B,
};

const fenceSample: Fence = {
  kind: 'owner-lock',
  path: '/home/ada/.local/state/leasehold/v1/workspaces/0123/service/owner.lock',
  holder: { pid: 4242, host: 'build-01' },
};

const hex = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((bytes) => Buffer.from(bytes).toString('hex'));
const capabilityLike = fc
  .uint8Array({ minLength: 32, maxLength: 32 })
  .map((bytes) => Buffer.from(bytes).toString('base64url'));
const uuid = fc.uuid();
const processId = fc.integer({ min: 1, max: 2 ** 31 - 1 });
/** Text within `max` code points, no NUL, sometimes exactly at the bound. */
const textOf = (max: number) =>
  fc
    .oneof(
      { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: Math.min(max, 24) }), weight: 8 },
      { arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 8 }), weight: 4 },
      { arbitrary: fc.constantFrom('x'.repeat(max), 'é'.repeat(max)), weight: 1 },
    )
    .filter((value) => !value.includes('\0') && [...value].length <= max);
const segment = fc
  .string({ unit: 'binary', minLength: 1, maxLength: 10 })
  .filter((value) => !value.includes('/') && !value.includes('\0') && value !== '.' && value !== '..');
const absolutePathArbitrary = fc.oneof(
  { arbitrary: fc.array(segment, { maxLength: 6 }).map((segments) => `/${segments.join('/')}`), weight: 10 },
  { arbitrary: fc.constant(`/${'p'.repeat(4095)}`), weight: 1 },
);
const endpointOf = (lowestPort: number) =>
  fc
    .tuple(fc.constantFrom('127.0.0.1', '[::1]'), fc.integer({ min: lowestPort, max: 65535 }))
    .map(([address, port]) => `http://${address}:${port}`);
const hostArbitrary = textOf(255);
const processStartArbitrary = textOf(128);
const holderArbitrary = fc.record(
  { pid: processId, host: hostArbitrary, processStart: processStartArbitrary },
  { requiredKeys: ['pid', 'host'] },
);
const reservationFields = {
  root: absolutePathArbitrary,
  stateHome: absolutePathArbitrary,
  configIdentity: hex,
  endpoint: endpointOf(1),
  epoch: uuid,
  pid: processId,
  host: hostArbitrary,
  processStart: processStartArbitrary,
  ownerToken: uuid,
};
const reservationRequired = [
  'root',
  'stateHome',
  'configIdentity',
  'endpoint',
  'epoch',
  'pid',
  'host',
  'ownerToken',
] as const;
const reservationArbitrary = fc.record(reservationFields, { requiredKeys: [...reservationRequired] });
const etcdPrefixArbitrary = fc
  .array(
    fc.stringMatching(/^[A-Za-z0-9._-]{1,12}$/).filter((value) => value !== '.' && value !== '..'),
    { minLength: 1, maxLength: 4 },
  )
  .map((segments) => `/${segments.join('/')}`);
const etcdEndpointArbitrary = fc
  .tuple(fc.constantFrom('http', 'https'), fc.oneof(fc.ipV4(), fc.domain()), fc.integer({ min: 1, max: 65535 }))
  .map(([scheme, host, port]) => `${scheme}://${host}:${port}`);
// At most four endpoints, so that a format document with the longest state home still fits DOCUMENT_BYTES.
const backendArbitrary: fc.Arbitrary<Backend> = fc.oneof(
  fc.constant({ kind: 'files' as const }),
  fc.record({
    kind: fc.constant('etcd' as const),
    endpoints: fc.array(etcdEndpointArbitrary, { minLength: 1, maxLength: 4 }),
    prefix: etcdPrefixArbitrary,
  }),
);
const backendSample: Backend = {
  kind: 'etcd',
  endpoints: ['http://10.0.0.5:2379', 'https://etcd.example:2379'],
  prefix: '/leasehold/team',
};

interface DocumentCase {
  name: string;
  tag: string | undefined;
  schema: z.ZodType;
  sample: JsonObject;
  arbitrary: fc.Arbitrary<unknown>;
  /** The largest file this document is read with. */
  maxBytes: number;
}

/** Ties a schema to its sample and arbitrary, so that the type checker proves both fit the schema. */
function documentCase<Schema extends z.ZodType>(
  name: string,
  tag: string | undefined,
  schema: Schema,
  sample: z.input<Schema>,
  arbitrary: fc.Arbitrary<z.input<Schema>>,
  maxBytes: number,
): DocumentCase {
  return { name, tag, schema, sample: sample as JsonObject, arbitrary, maxBytes };
}

const DOCUMENTS: readonly DocumentCase[] = [
  documentCase(
    'registryFormatSchema',
    'leasehold.registry-format/1',
    registryFormatSchema,
    { schema: 'leasehold.registry-format/1', stateHome: '/home/ada/.local/state/leasehold', backend: backendSample },
    fc.record(
      {
        schema: fc.constant('leasehold.registry-format/1' as const),
        stateHome: absolutePathArbitrary,
        backend: backendArbitrary,
      },
      { requiredKeys: ['schema', 'stateHome'] },
    ),
    DOCUMENT_BYTES,
  ),
  documentCase('backendSchema', undefined, backendSchema, backendSample, backendArbitrary, DOCUMENT_BYTES),
  documentCase(
    'reservationTableSchema',
    'leasehold.registry/1',
    reservationTableSchema,
    { schema: 'leasehold.registry/1', entries: [reservationSample] },
    fc.record({
      schema: fc.constant('leasehold.registry/1' as const),
      entries: fc.array(reservationArbitrary, { maxLength: 4 }),
    }),
    REGISTRY_BYTES,
  ),
  documentCase(
    'reservationSchema',
    undefined,
    reservationSchema,
    reservationSample,
    reservationArbitrary,
    PATHS_DOCUMENT_BYTES,
  ),
  documentCase(
    'registryLockSchema',
    'leasehold.registry-lock/1',
    registryLockSchema,
    {
      schema: 'leasehold.registry-lock/1',
      token: ID_C,
      pid: 77,
      host: 'build-01',
      processStart: 'boot:1',
      root: '/home/dev/project',
    },
    fc.record(
      {
        schema: fc.constant('leasehold.registry-lock/1' as const),
        token: uuid,
        pid: processId,
        host: hostArbitrary,
        processStart: processStartArbitrary,
        root: absolutePathArbitrary,
      },
      { requiredKeys: ['schema', 'token', 'pid', 'host', 'root'] },
    ),
    DOCUMENT_BYTES,
  ),
  documentCase(
    'serviceFormatSchema',
    'leasehold.service-format/1',
    serviceFormatSchema,
    {
      schema: 'leasehold.service-format/1',
      root: '/home/ada/project',
      stateHome: '/home/ada/.local/state/leasehold',
      configIdentity: HASH_A,
    },
    fc.record({
      schema: fc.constant('leasehold.service-format/1' as const),
      root: absolutePathArbitrary,
      stateHome: absolutePathArbitrary,
      configIdentity: hex,
    }),
    PATHS_DOCUMENT_BYTES,
  ),
  documentCase(
    'ownerConfigSchema',
    'leasehold.owner-config/1',
    ownerConfigSchema,
    { schema: 'leasehold.owner-config/1', endpoint: 'http://127.0.0.1:0', policyIdentity: HASH_B },
    fc.record({
      schema: fc.constant('leasehold.owner-config/1' as const),
      endpoint: endpointOf(0),
      policyIdentity: hex,
    }),
    DOCUMENT_BYTES,
  ),
  documentCase(
    'registrationSchema',
    'leasehold.registration/1',
    registrationSchema,
    { schema: 'leasehold.registration/1', ...reservationSample, checkoutToken: ID_C, phase: 'idle', version: 1 },
    fc.record(
      {
        schema: fc.constant('leasehold.registration/1' as const),
        ...reservationFields,
        checkoutToken: uuid,
        phase: fc.constantFrom(...PHASES),
        version: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
      },
      { requiredKeys: ['schema', ...reservationRequired, 'checkoutToken', 'phase', 'version'] },
    ),
    PATHS_DOCUMENT_BYTES,
  ),
  documentCase(
    'ownerLockSchema',
    'leasehold.owner-lock/1',
    ownerLockSchema,
    { schema: 'leasehold.owner-lock/1', epoch: ID_A, token: ID_B, pid: 4242, host: 'build-01' },
    fc.record({
      schema: fc.constant('leasehold.owner-lock/1' as const),
      epoch: uuid,
      token: uuid,
      pid: processId,
      host: hostArbitrary,
    }),
    DOCUMENT_BYTES,
  ),
  documentCase(
    'localCapabilitySchema',
    'leasehold.local-capability/1',
    localCapabilitySchema,
    { schema: 'leasehold.local-capability/1', epoch: ID_A, capability: CAPABILITY },
    fc.record({
      schema: fc.constant('leasehold.local-capability/1' as const),
      epoch: uuid,
      capability: capabilityLike,
    }),
    DOCUMENT_BYTES,
  ),
  documentCase(
    'checkoutLockSchema',
    'leasehold.checkout-lock/1',
    checkoutLockSchema,
    { schema: 'leasehold.checkout-lock/1', token: ID_C, pid: 4242, host: 'build-01', processStart: 'boot:1' },
    fc.record(
      {
        schema: fc.constant('leasehold.checkout-lock/1' as const),
        token: uuid,
        pid: processId,
        host: hostArbitrary,
        processStart: processStartArbitrary,
      },
      { requiredKeys: ['schema', 'token', 'pid', 'host'] },
    ),
    DOCUMENT_BYTES,
  ),
  documentCase(
    'companionSchema',
    'leasehold.companion/1',
    companionSchema,
    { schema: 'leasehold.companion/1', epoch: ID_A, pid: 4243, host: 'build-01', processStart: 'boot:1' },
    fc.record(
      {
        schema: fc.constant('leasehold.companion/1' as const),
        epoch: uuid,
        pid: processId,
        host: hostArbitrary,
        processStart: processStartArbitrary,
      },
      { requiredKeys: ['schema', 'epoch', 'pid', 'host'] },
    ),
    DOCUMENT_BYTES,
  ),
  documentCase(
    'recoveryRecordSchema',
    'leasehold.recovery-record/1',
    recoveryRecordSchema,
    {
      schema: 'leasehold.recovery-record/1',
      root: '/home/ada/project',
      digest: HASH_B,
      recordedAt: '2025-11-30T10:17:00.000Z',
      operator: { pid: 99, host: 'build-01', user: 'ada' },
      fences: [fenceSample, { kind: 'registry-row', path: '/home/ada/.local/state/leasehold/v1/registry/roots.json' }],
    },
    fc.record({
      schema: fc.constant('leasehold.recovery-record/1' as const),
      root: absolutePathArbitrary,
      digest: hex,
      recordedAt: fc
        .date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2999-12-31T23:59:59Z'), noInvalidDate: true })
        .map((date) => date.toISOString()),
      operator: fc.record({ pid: processId, host: hostArbitrary, user: textOf(256) }),
      fences: fc.array(
        fc.record(
          { kind: fc.constantFrom(...FENCE_KINDS), path: absolutePathArbitrary, holder: holderArbitrary },
          { requiredKeys: ['kind', 'path'] },
        ),
        { maxLength: 4 },
      ),
    }),
    // A record names up to 65 paths; no file bound is set for it here (see the README).
    REGISTRY_BYTES,
  ),
];

const documentArbitrary = fc.oneof(
  ...DOCUMENTS.map((entry) => entry.arbitrary.map((document) => ({ entry, document }))),
);

/** Keys that a document may leave out. */
const OPTIONAL_KEYS = new Set(['processStart', 'holder', 'backend']);

interface ObjectSite {
  object: JsonObject;
  path: (string | number)[];
}

/** Every object inside `value`, with its path, the root first. */
function objectsIn(value: Json, path: (string | number)[] = []): ObjectSite[] {
  if (Array.isArray(value)) return value.flatMap((item, index) => objectsIn(item, [...path, index]));
  if (typeof value !== 'object' || value === null) return [];
  return [
    { object: value, path },
    ...Object.entries(value).flatMap(([key, member]) => objectsIn(member, [...path, key])),
  ];
}

interface ValueSite {
  parent: JsonObject | Json[];
  key: string | number;
}

/** Every place that holds a value inside `value` (object members and array items). */
function valuesIn(value: Json): ValueSite[] {
  if (Array.isArray(value)) return value.flatMap((item, index) => [{ parent: value, key: index }, ...valuesIn(item)]);
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, member]) => [{ parent: value, key }, ...valuesIn(member)]);
}

// ---------------------------------------------------------------------------

describe('bounds', () => {
  it('are the numbers docs/layout.md and the README give', () => {
    expect(DOCUMENT_BYTES).toBe(8192);
    expect(PATHS_DOCUMENT_BYTES).toBe(32768);
    expect(REGISTRY_ENTRIES).toBe(256);
    expect(REGISTRY_BYTES).toBe(4194304);
    expect(RECOVERY_RECORD_FENCES).toBe(64);
  });

  it('fit the largest documents written in printable ASCII', () => {
    const longPath = `/${'p'.repeat(4095)}`;
    const fullReservation: Reservation = {
      ...reservationSample,
      root: longPath,
      stateHome: longPath,
      host: 'h'.repeat(255),
      processStart: 's'.repeat(128),
    };
    const registration = {
      schema: 'leasehold.registration/1',
      ...fullReservation,
      checkoutToken: ID_C,
      phase: 'quarantined',
      version: Number.MAX_SAFE_INTEGER,
    };
    expect(encode(decode(registrationSchema, registration)).byteLength).toBeLessThanOrEqual(PATHS_DOCUMENT_BYTES);
    const registry = {
      schema: 'leasehold.registry/1',
      entries: Array.from({ length: REGISTRY_ENTRIES }, () => fullReservation),
    };
    expect(encode(decode(reservationTableSchema, registry)).byteLength).toBeLessThanOrEqual(REGISTRY_BYTES);
    const largest: readonly [z.ZodType, unknown, number][] = [
      [registryFormatSchema, { schema: 'leasehold.registry-format/1', stateHome: longPath }, DOCUMENT_BYTES],
      [
        serviceFormatSchema,
        { schema: 'leasehold.service-format/1', root: longPath, stateHome: longPath, configIdentity: HASH_A },
        PATHS_DOCUMENT_BYTES,
      ],
      [
        registryLockSchema,
        {
          schema: 'leasehold.registry-lock/1',
          token: ID_A,
          pid: 2 ** 31 - 1,
          host: 'h'.repeat(255),
          processStart: 's'.repeat(128),
          root: longPath,
        },
        DOCUMENT_BYTES,
      ],
      [
        checkoutLockSchema,
        {
          schema: 'leasehold.checkout-lock/1',
          token: ID_A,
          pid: 2 ** 31 - 1,
          host: 'h'.repeat(255),
          processStart: 's'.repeat(128),
        },
        DOCUMENT_BYTES,
      ],
      [
        companionSchema,
        {
          schema: 'leasehold.companion/1',
          epoch: ID_A,
          pid: 2 ** 31 - 1,
          host: 'h'.repeat(255),
          processStart: 's'.repeat(128),
        },
        DOCUMENT_BYTES,
      ],
      [
        ownerLockSchema,
        { schema: 'leasehold.owner-lock/1', epoch: ID_A, token: ID_B, pid: 2 ** 31 - 1, host: 'h'.repeat(255) },
        DOCUMENT_BYTES,
      ],
      [
        ownerConfigSchema,
        { schema: 'leasehold.owner-config/1', endpoint: 'http://[::1]:65535', policyIdentity: HASH_A },
        DOCUMENT_BYTES,
      ],
      [
        localCapabilitySchema,
        { schema: 'leasehold.local-capability/1', epoch: ID_A, capability: CAPABILITY },
        DOCUMENT_BYTES,
      ],
    ];
    for (const [schema, document, bound] of largest) {
      expect(encode(decode(schema, document)).byteLength).toBeLessThanOrEqual(bound);
    }
  });
});

describe.each(DOCUMENTS)('$name', ({ schema, sample, tag, arbitrary, maxBytes }) => {
  it('accepts a valid sample, unchanged', () => {
    expect(decode(schema, sample)).toEqual(sample);
    expect(decode(schema, parse(encode(sample), maxBytes))).toEqual(sample);
  });

  it('refuses each missing required key', () => {
    for (const key of Object.keys(sample).filter((name) => !OPTIONAL_KEYS.has(name))) {
      expect(
        refusal(() => decode(schema, without(sample, key))),
        key,
      ).toMatch(new RegExp(` \\$\\.${key}$`));
    }
    // A missing literal tag is reported as missing, not as a wrong value.
    if ('schema' in sample)
      expect(refusal(() => decode(schema, without(sample, 'schema')))).toBe('document: missing key $.schema');
  });

  it('accepts a missing optional key', () => {
    for (const key of Object.keys(sample).filter((name) => OPTIONAL_KEYS.has(name))) {
      const rest = without(sample, key);
      expect(decode(schema, rest)).toEqual(rest);
    }
  });

  it('refuses an unknown key, even one named like a known key of another document', () => {
    for (const key of ['extra', 'schema2', 'Schema', 'processstart', 'retained', 'capability', '__proto__', '']) {
      if (Object.hasOwn(sample, key)) continue;
      const document = copyOf(sample) as JsonObject;
      setOwn(document, key, null);
      expect(
        refusal(() => decode(schema, document)),
        key,
      ).toBe('document: unknown key in $');
    }
  });

  it('refuses a key holding undefined where a value is required, and null', () => {
    for (const key of Object.keys(sample).filter((name) => !OPTIONAL_KEYS.has(name))) {
      expect(
        codeOf(() => decode(schema, { ...sample, [key]: null })),
        key,
      ).toBe('refused');
    }
  });

  it('refuses another tag and a non-object', () => {
    if (tag !== undefined) {
      expect(sample['schema']).toBe(tag);
      const newer = tag.replace(/\/1$/, '/2');
      expect(refusal(() => decode(schema, { ...sample, schema: newer }))).toBe(
        'document: not an allowed value at $.schema',
      );
      for (const other of DOCUMENTS) {
        if (other.tag !== undefined && other.tag !== tag) {
          expect(
            codeOf(() => decode(schema, { ...sample, schema: other.tag })),
            other.name,
          ).toBe('refused');
        }
      }
    }
    for (const value of [null, [], [sample], 'document', 1, true, undefined]) {
      expect(codeOf(() => decode(schema, value))).toBe('refused');
    }
  });

  it('round-trips generated documents byte for byte', () => {
    fc.assert(
      fc.property(arbitrary, (document) => {
        const bytes = encode(document);
        const decoded: unknown = decode(schema, parse(bytes, maxBytes));
        expect(decoded).toEqual(document);
        expect(encode(decoded)).toEqual(bytes);
      }),
      { numRuns: 60 },
    );
  });
});

describe('document rules', () => {
  it('a claim: its own tag only, a token, a holder, a root and an ISO 8601 time', () => {
    const schema = claimSchema('leasehold.wait-ticket/1');
    const claim = {
      schema: 'leasehold.wait-ticket/1',
      token: ID_C,
      pid: 42,
      host: 'build-3',
      root: '/w',
      since: '2026-12-06T03:00:00.000Z',
    };
    expect(decode(schema, claim)).toEqual(claim);
    expect(codeOf(() => decode(claimSchema('leasehold.start-claim/1'), claim))).toBe('refused');
    for (const changed of [{ since: 'yesterday' }, { root: 'w' }, { token: 'x' }, { extra: 1 }])
      expect(
        codeOf(() => decode(schema, { ...claim, ...changed })),
        JSON.stringify(changed),
      ).toBe('refused');
  });

  it('registration: a version is a whole number from 1', () => {
    const registration = DOCUMENTS.find((entry) => entry.name === 'registrationSchema')!.sample;
    expect(decode(registrationSchema, { ...registration, version: 7 }).version).toBe(7);
    for (const version of [0, -1, 1.5, Number.MAX_SAFE_INTEGER + 1, '2'])
      expect(codeOf(() => decode(registrationSchema, { ...registration, version }))).toBe('refused');
  });

  it('registration: every phase, and nothing else', () => {
    const registration = DOCUMENTS.find((entry) => entry.name === 'registrationSchema')!.sample;
    for (const phase of PHASES) expect(decode(registrationSchema, { ...registration, phase }).phase).toBe(phase);
    for (const phase of ['running', 'Idle', '', 'stopped ']) {
      expect(refusal(() => decode(registrationSchema, { ...registration, phase }))).toBe(
        'document: not an allowed value at $.phase',
      );
    }
    expect(PHASES).toEqual(['idle', 'stopping', 'quarantined', 'stopped']);
  });

  it('a reservation and a registration need a concrete port; an owner config may ask for port 0', () => {
    const registration = DOCUMENTS.find((entry) => entry.name === 'registrationSchema')!.sample;
    expect(codeOf(() => decode(reservationSchema, { ...reservationSample, endpoint: 'http://127.0.0.1:0' }))).toBe(
      'refused',
    );
    expect(codeOf(() => decode(registrationSchema, { ...registration, endpoint: 'http://[::1]:0' }))).toBe('refused');
    expect(
      decode(ownerConfigSchema, {
        schema: 'leasehold.owner-config/1',
        endpoint: 'http://[::1]:0',
        policyIdentity: HASH_A,
      }).endpoint,
    ).toBe('http://[::1]:0');
  });

  it('owner-lock and owner-config carry no processStart', () => {
    const ownerLock = { schema: 'leasehold.owner-lock/1', epoch: ID_A, token: ID_B, pid: 1, host: 'h' };
    expect(refusal(() => decode(ownerLockSchema, { ...ownerLock, processStart: 'boot:1' }))).toBe(
      'document: unknown key in $',
    );
  });

  it('identities are lowercase hashes and tokens are lowercase ids', () => {
    expect(
      codeOf(() => decode(reservationSchema, { ...reservationSample, configIdentity: HASH_A.toUpperCase() })),
    ).toBe('refused');
    expect(codeOf(() => decode(reservationSchema, { ...reservationSample, ownerToken: ID_A.toUpperCase() }))).toBe(
      'refused',
    );
    expect(codeOf(() => decode(reservationSchema, { ...reservationSample, root: 'relative/root' }))).toBe('refused');
  });

  it('registry: 256 entries accepted, 257 refused', () => {
    const entries = (count: number) => Array.from({ length: count }, () => reservationSample);
    expect(
      decode(reservationTableSchema, { schema: 'leasehold.registry/1', entries: entries(256) }).entries,
    ).toHaveLength(256);
    expect(decode(reservationTableSchema, { schema: 'leasehold.registry/1', entries: [] }).entries).toHaveLength(0);
    expect(
      refusal(() => decode(reservationTableSchema, { schema: 'leasehold.registry/1', entries: entries(257) })),
    ).toBe('document: too large at $.entries');
  });

  it('registry: an entry is as closed as a reservation', () => {
    const extra = { ...reservationSample, note: 'x' };
    expect(
      refusal(() =>
        decode(reservationTableSchema, { schema: 'leasehold.registry/1', entries: [reservationSample, extra] }),
      ),
    ).toBe('document: unknown key in $.entries[1]');
    const withoutPid = without(reservationSample, 'pid');
    expect(
      refusal(() => decode(reservationTableSchema, { schema: 'leasehold.registry/1', entries: [withoutPid] })),
    ).toBe('document: missing key $.entries[0].pid');
  });

  it('recovery record: recordedAt is an ISO date-time in UTC', () => {
    const record = DOCUMENTS.find((entry) => entry.name === 'recoveryRecordSchema')!.sample;
    for (const recordedAt of ['2025-11-30T10:17:00Z', '2025-11-30T10:17:00.123456Z', new Date(0).toISOString()]) {
      expect(decode(recoveryRecordSchema, { ...record, recordedAt }).recordedAt).toBe(recordedAt);
    }
    for (const recordedAt of [
      '2025-11-30',
      '2025-11-30T10:17Z',
      '2025-02-30T00:00:00Z',
      '2025-11-30T10:17:00+01:00',
      '2025-11-30 10:17:00Z',
      '2025-13-01T00:00:00Z',
      'yesterday',
      '',
    ]) {
      expect(
        codeOf(() => decode(recoveryRecordSchema, { ...record, recordedAt })),
        recordedAt,
      ).toBe('refused');
    }
  });

  it('recovery record: 64 fences accepted, 65 refused; kinds, holders and operator are closed', () => {
    const record = DOCUMENTS.find((entry) => entry.name === 'recoveryRecordSchema')!.sample;
    const fences = (count: number) => Array.from({ length: count }, () => fenceSample);
    expect(decode(recoveryRecordSchema, { ...record, fences: fences(64) }).fences).toHaveLength(64);
    expect(refusal(() => decode(recoveryRecordSchema, { ...record, fences: fences(65) }))).toBe(
      'document: too large at $.fences',
    );
    for (const kind of FENCE_KINDS) {
      expect(decode(recoveryRecordSchema, { ...record, fences: [{ ...fenceSample, kind }] }).fences[0]?.kind).toBe(
        kind,
      );
    }
    expect(
      refusal(() => decode(recoveryRecordSchema, { ...record, fences: [{ ...fenceSample, kind: 'journal' }] })),
    ).toBe('document: not an allowed value at $.fences[0].kind');
    expect(
      refusal(() => decode(recoveryRecordSchema, { ...record, fences: [{ ...fenceSample, capability: CAPABILITY }] })),
    ).toBe('document: unknown key in $.fences[0]');
    expect(
      refusal(() =>
        decode(recoveryRecordSchema, {
          ...record,
          fences: [{ ...fenceSample, holder: { pid: 1, host: 'h', user: 'u' } }],
        }),
      ),
    ).toBe('document: unknown key in $.fences[0].holder');
    expect(refusal(() => decode(recoveryRecordSchema, { ...record, operator: { pid: 1, host: 'h' } }))).toBe(
      'document: missing key $.operator.user',
    );
    expect(refusal(() => decode(recoveryRecordSchema, { ...record, operator: { pid: 1, host: 'h', user: '' } }))).toBe(
      'document: too small at $.operator.user',
    );
  });
});

describe('backend rules', () => {
  const etcd = (fields: Record<string, unknown>) => ({ ...backendSample, ...fields });

  it('a format document without a backend is the file backend; files carries nothing else', () => {
    expect(
      decode(registryFormatSchema, { schema: 'leasehold.registry-format/1', stateHome: '/s' }).backend,
    ).toBeUndefined();
    expect(decode(backendSchema, { kind: 'files' })).toEqual({ kind: 'files' });
    expect(refusal(() => decode(backendSchema, { kind: 'files', prefix: '/x' }))).toBe('document: unknown key in $');
    expect(refusal(() => decode(backendSchema, { kind: 'zookeeper' }))).toBe('document: invalid at $.kind');
  });

  it('an etcd prefix is /segments of letters, digits, ".", "_", "-", with no "." or ".." segment and no trailing "/"', () => {
    for (const prefix of ['/a', '/leasehold/team', '/a.b/c_d/e-f', `/${'p'.repeat(511)}`])
      expect(decode(backendSchema, etcd({ prefix }))).toEqual(etcd({ prefix }));
    for (const prefix of [
      '',
      '/',
      'a',
      'a/b',
      '/a/',
      '/a//b',
      '/./a',
      '/a/..',
      '/a b',
      '/a@b',
      '/é',
      `/${'p'.repeat(512)}`,
    ]) {
      expect(
        codeOf(() => decode(backendSchema, etcd({ prefix }))),
        prefix,
      ).toBe('refused');
    }
  });

  it('an etcd endpoint is http(s)://host:port and nothing else: no credentials, path, query or fragment', () => {
    for (const endpoint of ['http://10.0.0.5:2379', 'https://etcd.example:2379', 'http://[::1]:2379']) {
      expect(decode(backendSchema, etcd({ endpoints: [endpoint] }))).toEqual(etcd({ endpoints: [endpoint] }));
    }
    for (const endpoint of [
      '10.0.0.5:2379',
      'http://10.0.0.5',
      'grpc://10.0.0.5:2379',
      'http://user:pass@10.0.0.5:2379',
      'http://10.0.0.5:2379/',
      'http://10.0.0.5:2379?x=1',
      'http://10.0.0.5:2379#x',
      'http://a b:1',
      'http://10.0.0.5:0',
      'http://10.0.0.5:65536',
      'http://10.0.0.5:02379',
      'http://a:b:1',
    ]) {
      expect(
        codeOf(() => decode(backendSchema, etcd({ endpoints: [endpoint] }))),
        endpoint,
      ).toBe('refused');
    }
  });

  it('1 to 16 endpoints', () => {
    const endpoints = (count: number) => Array.from({ length: count }, (_, index) => `http://10.0.0.${index}:2379`);
    expect(decode(backendSchema, etcd({ endpoints: endpoints(16) }))).toEqual(etcd({ endpoints: endpoints(16) }));
    expect(refusal(() => decode(backendSchema, etcd({ endpoints: [] })))).toBe('document: too small at $.endpoints');
    expect(refusal(() => decode(backendSchema, etcd({ endpoints: endpoints(17) })))).toBe(
      'document: too large at $.endpoints',
    );
  });
});

describe('decoder properties', () => {
  it('a generated document with one required key removed, at any depth, is refused at that path', () => {
    fc.assert(
      fc.property(documentArbitrary, fc.nat(), ({ entry, document }, choice) => {
        const copy = copyOf(document);
        const sites = objectsIn(copy).flatMap(({ object, path }) =>
          Object.keys(object)
            .filter((key) => !OPTIONAL_KEYS.has(key))
            .map((key) => ({ object, key, path: [...path, key] })),
        );
        const site = sites[choice % sites.length]!;
        delete site.object[site.key];
        const message = refusal(() => decode(entry.schema, copy));
        expect(message.endsWith(` ${formatPath(site.path)}`), message).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('a generated document with one extra key, at any depth, is refused as an unknown key there', () => {
    fc.assert(
      fc.property(
        documentArbitrary,
        fc.nat(),
        fc.string({ unit: 'binary', maxLength: 50 }),
        fc.jsonValue({ maxDepth: 2 }),
        ({ entry, document }, choice, key, value) => {
          const copy = copyOf(document);
          const sites = objectsIn(copy).filter(({ object }) => !Object.hasOwn(object, key));
          fc.pre(sites.length > 0);
          const site = sites[choice % sites.length]!;
          setOwn(site.object, key, value);
          expect(refusal(() => decode(entry.schema, copy))).toBe(`document: unknown key in ${formatPath(site.path)}`);
        },
      ),
      { numRuns: 300 },
    );
  });
});

// ---------------------------------------------------------------------------
// Secrets: a capability-shaped string must never come back in an error.

/** Runs `action`, expects a `refused` ContractError, and checks that no rendering of it holds `secret`. */
function expectRefusedWithoutSecret(action: () => unknown, secret: string): void {
  let caught: unknown;
  try {
    action();
  } catch (error) {
    caught = error;
  }
  expect(ContractError.is(caught, 'refused')).toBe(true);
  expectNoSecret(caught as ContractError, secret);
}

function expectNoSecret(error: ContractError, secret: string): void {
  expect(error.message).not.toContain(secret);
  expect(String(error)).not.toContain(secret);
  expect(JSON.stringify(error)).not.toContain(secret);
  expect(error.stack ?? '').not.toContain(secret);
  expect(inspect(error)).not.toContain(secret);
  expect(error.cause).toBeUndefined();
}

const utf8 = new TextEncoder();
const registration = {
  schema: 'leasehold.registration/1',
  ...reservationSample,
  checkoutToken: ID_C,
  phase: 'idle',
  version: 1,
};
const registrationBytes = (text: string) => parse(utf8.encode(text), PATHS_DOCUMENT_BYTES);

const SECRET_PLACES: readonly { place: string; action: (secret: string) => unknown }[] = [
  { place: 'an epoch', action: (secret) => decode(registrationSchema, { ...registration, epoch: secret }) },
  { place: 'a pid', action: (secret) => decode(registrationSchema, { ...registration, pid: secret }) },
  { place: 'an endpoint', action: (secret) => decode(registrationSchema, { ...registration, endpoint: secret }) },
  {
    place: 'an endpoint port',
    action: (secret) => decode(registrationSchema, { ...registration, endpoint: `http://127.0.0.1:${secret}` }),
  },
  { place: 'a hash', action: (secret) => decode(registrationSchema, { ...registration, configIdentity: secret }) },
  { place: 'a phase', action: (secret) => decode(registrationSchema, { ...registration, phase: secret }) },
  { place: 'a tag', action: (secret) => decode(registrationSchema, { ...registration, schema: secret }) },
  { place: 'a path', action: (secret) => decode(registrationSchema, { ...registration, root: secret }) },
  {
    place: "an unknown key's value",
    action: (secret) => decode(registrationSchema, { ...registration, note: secret }),
  },
  { place: "an unknown key's name", action: (secret) => decode(registrationSchema, { ...registration, [secret]: 1 }) },
  {
    place: 'a nested unknown key name',
    action: (secret) =>
      decode(reservationTableSchema, {
        schema: 'leasehold.registry/1',
        entries: [{ ...reservationSample, [secret]: secret }],
      }),
  },
  {
    place: 'a too-long host',
    action: (secret) => decode(registrationSchema, { ...registration, host: secret.repeat(6) }),
  },
  {
    place: 'a too-long processStart',
    action: (secret) => decode(registrationSchema, { ...registration, processStart: secret.repeat(3) }),
  },
  {
    place: 'a host with a NUL',
    action: (secret) => decode(registrationSchema, { ...registration, host: `${secret}\0` }),
  },
  {
    place: 'a malformed capability',
    action: (secret) =>
      decode(localCapabilitySchema, { schema: 'leasehold.local-capability/1', epoch: ID_A, capability: `${secret}=` }),
  },
  {
    place: 'a capability with a +',
    action: (secret) =>
      decode(localCapabilitySchema, {
        schema: 'leasehold.local-capability/1',
        epoch: ID_A,
        capability: `+${secret.slice(1)}`,
      }),
  },
  {
    place: 'a capability as an array',
    action: (secret) =>
      decode(localCapabilitySchema, { schema: 'leasehold.local-capability/1', epoch: ID_A, capability: [secret] }),
  },
  {
    place: 'a recordedAt',
    action: (secret) =>
      decode(recoveryRecordSchema, {
        ...DOCUMENTS.find((entry) => entry.name === 'recoveryRecordSchema')!.sample,
        recordedAt: secret,
      }),
  },
  {
    place: 'safeDecode',
    action: (secret) => {
      const result = safeDecode(registrationSchema, { ...registration, epoch: secret });
      if (!result.success) throw result.error;
    },
  },
  { place: "a duplicate key's value", action: (secret) => registrationBytes(`{"a":"${secret}","a":"${secret}"}`) },
  { place: "a duplicate key's name", action: (secret) => registrationBytes(`{"${secret}":1,"${secret}":2}`) },
  {
    place: 'a nested duplicate key under a secret key',
    action: (secret) => registrationBytes(`{"${secret}":[{"k":"${secret}","k":1}]}`),
  },
  { place: 'an unquoted value', action: (secret) => registrationBytes(`{"capability":${secret}}`) },
  { place: 'trailing content', action: (secret) => registrationBytes(`{} ${secret}`) },
  {
    place: 'a string with a control character',
    action: (secret) => registrationBytes(`{"capability":"${secret}\u0001"}`),
  },
  { place: 'a string with an invalid escape', action: (secret) => registrationBytes(`{"capability":"${secret}\\x"}`) },
  { place: 'an unterminated string', action: (secret) => registrationBytes(`{"capability":"${secret}`) },
  {
    place: 'invalid UTF-8',
    action: (secret) => parse(new Uint8Array([...utf8.encode(`"${secret}`), 0xff, 0x22]), 1000),
  },
  { place: 'an oversized file', action: (secret) => parse(utf8.encode(`"${secret}"`), 10) },
  {
    place: 'a key too deep',
    action: (secret) => registrationBytes(`${'['.repeat(64)}{"${secret}":1}${']'.repeat(64)}`),
  },
];

describe('secrets never appear in an error', () => {
  it.each(SECRET_PLACES)('as $place', ({ action }) => {
    fc.assert(
      fc.property(capabilityLike, (secret) => {
        expectRefusedWithoutSecret(() => action(secret), secret);
      }),
      { numRuns: 25 },
    );
  });

  it('injected anywhere in any document, as a value, a key, or raw bytes', () => {
    const injection = fc.oneof(
      fc.record({ mode: fc.constant('value' as const), repeat: fc.integer({ min: 1, max: 8 }) }),
      fc.record({ mode: fc.constant('key name' as const), repeat: fc.constant(1) }),
      fc.record({ mode: fc.constant('key value' as const), repeat: fc.constant(1) }),
      fc.record({ mode: fc.constant('bytes' as const), repeat: fc.constant(1) }),
    );
    let refusals = 0;
    fc.assert(
      fc.property(
        documentArbitrary,
        capabilityLike,
        injection,
        fc.nat(),
        fc.nat(),
        ({ entry, document }, secret, { mode, repeat }, choice, offset) => {
          const copy = copyOf(document);
          let bytes: Uint8Array;
          if (mode === 'value') {
            const sites = valuesIn(copy);
            const site = sites[choice % sites.length]!;
            (site.parent as Record<string | number, Json>)[site.key] = secret.repeat(repeat);
            bytes = encode(copy);
          } else if (mode === 'bytes') {
            const text = new TextDecoder().decode(encode(copy));
            const at = offset % (text.length + 1);
            bytes = utf8.encode(text.slice(0, at) + secret + text.slice(at));
          } else {
            const sites = objectsIn(copy);
            const site = sites[choice % sites.length]!;
            if (mode === 'key name') setOwn(site.object, secret, choice % 2 === 0 ? null : { [secret]: secret });
            else setOwn(site.object, `k${choice % 10}`, secret);
            bytes = encode(copy);
          }
          try {
            decode(entry.schema, parse(bytes, entry.maxBytes));
          } catch (error) {
            expect(ContractError.is(error, 'refused')).toBe(true);
            expectNoSecret(error as ContractError, secret);
            refusals += 1;
          }
        },
      ),
      { numRuns: 400 },
    );
    // Most injections break a rule (the property would prove nothing otherwise).
    expect(refusals).toBeGreaterThan(200);
  });
});
