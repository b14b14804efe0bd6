import { chmodSync, readFileSync } from 'node:fs';
import { inspect as utilInspect } from 'node:util';
import { ContractError, encode } from '@leasehold/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import {
  bytesOf,
  caughtErrors,
  cleanUp,
  codeOf,
  codeOfAsync,
  makePlace,
  modeOf,
  replaceFile,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  ANY_PORT,
  BOUND,
  configFor,
  coordinationFor,
  policyBytes,
  registryPaths,
  stateTreeOf,
} from '../test/functional-helpers.js';
import {
  Checkout,
  acquireWorkspace,
  initializeWorkspace,
  inspectWorkspace,
  workspaceConfiguration,
  workspaceLocalAccess,
  type Inspection,
  type FileLease,
  type Workspace,
} from './index.js';

afterEach(cleanUp);

/** The forms a leaked capability could take: as written, its raw bytes as hex and as standard base64. */
function formsOf(capability: string): string[] {
  const raw = Buffer.from(capability, 'base64url');
  expect(raw).toHaveLength(32);
  return [capability, raw.toString('hex'), raw.toString('base64').replace(/=+$/, '')];
}

/** Every text an error shows: message, String, JSON, stack, util.inspect, and the same for its causes. */
function textsOfError(error: unknown, depth = 0): string[] {
  if (!(error instanceof Error) || depth > 8) return [JSON.stringify(error) ?? String(error), String(error)];
  const texts = [
    error.message,
    String(error),
    JSON.stringify(error),
    error.stack ?? '',
    utilInspect(error, { depth: 10 }),
  ];
  return error.cause === undefined ? texts : [...texts, ...textsOfError(error.cause, depth + 1)];
}

function expectAbsent(secret: string, texts: readonly string[], what: string): void {
  for (const form of formsOf(secret)) {
    for (const text of texts) expect({ what, leaks: text.includes(form) }).toEqual({ what, leaks: false });
  }
}

/** The capability appears in no error caught so far, no inspection, no registration, and in no file but its own. */
function expectSecretKept(
  place: TestPlace,
  coordination: Workspace,
  secret: string,
  seen: { inspections: Inspection[]; leases: FileLease[] },
): void {
  expect(caughtErrors.length).toBeGreaterThan(0);
  for (const error of caughtErrors) expectAbsent(secret, textsOfError(error), 'an error');
  expectAbsent(
    secret,
    seen.inspections.map((inspection) => JSON.stringify(inspection)),
    'an inspection',
  );
  expectAbsent(
    secret,
    seen.leases.map((lease) => JSON.stringify(lease.registration)),
    'a registration',
  );
  const holders: string[] = [];
  for (const [name, entry] of Object.entries(stateTreeOf(place.stateHome))) {
    if (entry.kind !== 'file') continue;
    const bytes = Buffer.from(entry.content, 'hex');
    const forms = formsOf(secret)
      .map((form) => bytes.includes(form))
      .concat(bytes.includes(Buffer.from(secret, 'base64url')));
    if (forms.some(Boolean)) holders.push(name);
  }
  const capabilityFile = coordination.places.capability.slice(place.stateHome.length + 1);
  expect(holders).toEqual([capabilityFile]);
  expect(modeOf(coordination.places.capability)).toBe(0o600);
}

describe('the capability stays in its file', () => {
  it('through the whole life: held, stopping, quarantined, stopped, refused calls', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'life');
    const inspections: Inspection[] = [inspectWorkspace(coordination)];
    const leases: FileLease[] = [];
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND, (workspace) =>
      workspace.writeHostConfig(policyBytes()),
    );
    leases.push(lease);
    const { capability } = workspaceLocalAccess(coordination);
    expect(readFileSync(coordination.places.capability, 'utf8')).toContain(capability);
    inspections.push(inspectWorkspace(coordination));
    lease.phase('stopping');
    inspections.push(inspectWorkspace(coordination));
    lease.phase('quarantined');
    inspections.push(inspectWorkspace(coordination));
    lease.phase('idle');
    inspections.push(inspectWorkspace(coordination));

    // Refusals while it is held.
    const other = configFor('http://127.0.0.1:0', 'another policy');
    expect(await codeOfAsync(() => acquireWorkspace(coordination, ANY_PORT, 'http://127.0.0.1:40002'))).toBe(
      'conflict',
    );
    expect(await codeOfAsync(() => acquireWorkspace(coordination, ANY_PORT))).toBe('conflict');
    expect(await codeOfAsync(() => initializeWorkspace(coordination, other))).toBe('conflict');
    expect(await codeOfAsync(() => acquireWorkspace(coordinationFor(place, 'neighbour'), ANY_PORT, BOUND))).toBe(
      'conflict',
    );
    const checkout = new Checkout(coordination.root, { stateHome: place.stateHome });
    expect(await codeOfAsync(() => checkout.acquire())).toBe('conflict');
    const held = checkout.inspect();
    if (held === undefined) throw new Error('expected the checkout lock');
    expect(await codeOfAsync(() => checkout.breakIfAbsent(held.snapshot))).toBe('quarantine');
    expect(codeOf(() => lease.phase('stopped' as 'idle'))).toBe('refused');
    expectSecretKept(place, coordination, capability, { inspections, leases });

    await lease.release();
    inspections.push(inspectWorkspace(coordination));
    expect(codeOf(() => workspaceLocalAccess(coordination))).toBe('unavailable');
    expect(codeOf(() => lease.assert())).toBe('unavailable');
    expect(await codeOfAsync(() => lease.release())).toBe('unavailable');
    expectAbsent(
      capability,
      inspections.map((inspection) => JSON.stringify(inspection)),
      'an inspection',
    );
    for (const error of caughtErrors) expectAbsent(capability, textsOfError(error), 'an error');
    expectAbsent(
      capability,
      [
        readFileSync(registryPaths(place.stateHome).roots, 'utf8'),
        readFileSync(coordination.places.registration, 'utf8'),
      ],
      'a file',
    );

    // A second life has a new capability, kept the same way.
    const again = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    leases.push(again);
    const second = workspaceLocalAccess(coordination).capability;
    expect(second).not.toBe(capability);
    inspections.push(inspectWorkspace(coordination));
    expectSecretKept(place, coordination, second, { inspections, leases });
  });

  const damages: readonly { name: string; bytes: (capability: string, epoch: string) => Uint8Array | undefined }[] = [
    {
      name: 'an unknown key',
      bytes: (capability, epoch) =>
        encode({ schema: 'leasehold.local-capability/1', epoch, capability, extra: capability }),
    },
    {
      name: 'the capability as an unknown key',
      bytes: (capability, epoch) =>
        encode({ schema: 'leasehold.local-capability/1', epoch, capability, [capability]: 1 }),
    },
    {
      name: 'a capability one character too long',
      bytes: (capability, epoch) =>
        encode({ schema: 'leasehold.local-capability/1', epoch, capability: `${capability}A` }),
    },
    {
      name: 'a capability of the wrong type',
      bytes: (capability, epoch) => encode({ schema: 'leasehold.local-capability/1', epoch, capability: [capability] }),
    },
    {
      name: 'truncated JSON',
      bytes: (capability, epoch) => bytesOf(`{"capability":"${capability}","epoch":"${epoch}"`),
    },
    {
      name: 'a duplicate key',
      bytes: (capability, epoch) =>
        bytesOf(
          `{"capability":"${capability}","capability":"${capability}","epoch":"${epoch}","schema":"leasehold.local-capability/1"}`,
        ),
    },
    {
      name: 'another epoch',
      bytes: (capability) =>
        encode({ schema: 'leasehold.local-capability/1', epoch: '00000000-0000-4000-8000-000000000000', capability }),
    },
    { name: 'mode 0644', bytes: () => undefined },
  ];

  for (const { name, bytes } of damages) {
    it(`in no error or inspection when its file holds ${name}`, async () => {
      const place = makePlace('coordination');
      const coordination = coordinationFor(place, 'damaged');
      const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
      const { capability, epoch } = workspaceLocalAccess(coordination);
      const lost = new Promise<unknown>((resolve) => {
        lease.watch(10, resolve);
      });
      const damaged = bytes(capability, epoch);
      if (damaged === undefined) chmodSync(coordination.places.capability, 0o644);
      else replaceFile(place.base, coordination.places.capability, damaged);

      const inspections = [inspectWorkspace(coordination)];
      expect(inspections[0]?.status).toBe('unavailable');
      expect(codeOf(() => workspaceLocalAccess(coordination))).toBe('unavailable');
      expect(codeOf(() => workspaceConfiguration(coordination))).toBe('refused');
      expect(await codeOfAsync(() => initializeWorkspace(coordination, ANY_PORT))).toBe('refused');
      expect(await codeOfAsync(() => new Checkout(coordination.root, { stateHome: place.stateHome }).acquire())).toBe(
        'refused',
      );
      expect(await codeOfAsync(() => acquireWorkspace(coordination, ANY_PORT, 'http://127.0.0.1:40002'))).toBe(
        'conflict',
      );
      // The owner rereads its files strictly: a malformed or unsafe file is refused, a valid new one is a change.
      const lostCode = name === 'another epoch' ? 'conflict' : 'refused';
      const error = await lost;
      caughtErrors.push(error);
      expect(ContractError.is(error, lostCode)).toBe(true);
      expect(codeOf(() => lease.assert())).toBe(lostCode);
      expect(await codeOfAsync(() => lease.release())).toBe(lostCode);

      for (const error of caughtErrors) expectAbsent(capability, textsOfError(error), 'an error');
      expectAbsent(
        capability,
        inspections.map((inspection) => JSON.stringify(inspection)),
        'an inspection',
      );
      expectAbsent(capability, [JSON.stringify(lease.registration)], 'the registration');
      for (const path of [
        registryPaths(place.stateHome).roots,
        coordination.places.registration,
        coordination.places.ownerLock,
        coordination.places.format,
        coordination.places.config,
        coordination.places.checkoutLock,
      ]) {
        expectAbsent(capability, [readFileSync(path, 'utf8')], path);
      }
    });
  }
});
