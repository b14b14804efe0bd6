import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encode, type Registration, type WorkspacePlaces } from '@leasehold/contracts';
import { currentProcess } from '@leasehold/private-files';
import { afterEach, describe, expect, it } from 'vitest';
import {
  bytesOf,
  cleanUp,
  codeOf,
  makePlace,
  replaceFile,
  rewriteJson,
  sha256Hex,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  ANY_PORT,
  BOUND,
  coordinationFor,
  policyBytes,
  readJson,
  registryPaths,
  registryRows,
  stateTreeOf,
  unchangedCodeOf,
} from '../test/functional-helpers.js';
import {
  Checkout,
  acquireWorkspace,
  initializeWorkspace,
  inspectWorkspace,
  openWorkspace,
  workspaceConfiguration,
  workspaceLocalAccess,
  type Workspace,
} from './index.js';

afterEach(cleanUp);

type Base = 'live' | 'stopped';

/** A workspace acquired (with host-config.json), and for `stopped` released; the lease is never used again. */
interface Broken {
  readonly place: TestPlace;
  readonly coordination: Workspace;
  readonly places: WorkspacePlaces;
  /** The registration as the files hold it once the base is made. */
  readonly registration: Registration;
}

async function makeBase(base: Base): Promise<Broken> {
  const place = makePlace('coordination');
  const coordination = coordinationFor(place, 'workspace');
  const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND, (workspace) =>
    workspace.writeHostConfig(policyBytes()),
  );
  if (base === 'stopped') await lease.release();
  const registration = readJson(coordination.places.registration) as unknown as Registration;
  return { place, coordination, places: coordination.places, registration };
}

function ownerLockBytes(registration: Registration): Uint8Array {
  const { epoch, ownerToken: token, pid, host } = registration;
  return encode({ schema: 'leasehold.owner-lock/1', epoch, token, pid, host });
}

function checkoutLockBytes(token: string): Uint8Array {
  return encode({ schema: 'leasehold.checkout-lock/1', token, ...currentProcess() });
}

function companionBytes(epoch: string, host = currentProcess().host): Uint8Array {
  return encode({ schema: 'leasehold.companion/1', epoch, ...currentProcess(), host });
}

function capabilityBytes(epoch: string): Uint8Array {
  return encode({ schema: 'leasehold.local-capability/1', epoch, capability: randomBytes(32).toString('base64url') });
}

/** Adds a duplicate of the first key of a canonical JSON object (`{"a":...` becomes `{"a":...,"a":...`). */
function withDuplicateKey(path: string, key: string, value: unknown): Uint8Array {
  const text = readFileSync(path, 'utf8');
  return bytesOf(`{${JSON.stringify(key)}:${JSON.stringify(value)},${text.slice(1)}`);
}

interface Case {
  readonly name: string;
  readonly bases: readonly Base[];
  /** The path the refusal must name: the file or folder that breaks the rule. */
  readonly where: (places: WorkspacePlaces) => string;
  breakState: (broken: Broken) => void;
}

const BOTH: readonly Base[] = ['live', 'stopped'];

const cases: readonly Case[] = [
  // The folders hold only allowed names (docs/layout.md, "A workspace's private root", "The service folder").
  {
    name: 'an extra file in the service folder',
    where: (places) => places.service,
    bases: BOTH,
    breakState: ({ place, places }) => replaceFile(place.base, join(places.service, 'stray.json'), bytesOf('{}')),
  },
  {
    name: 'an extra file in the private root',
    where: (places) => places.privateRoot,
    bases: BOTH,
    breakState: ({ place, places }) => replaceFile(place.base, join(places.privateRoot, 'stray.json'), bytesOf('{}')),
  },
  {
    name: 'an extra folder in the namespace folder',
    where: (places) => places.namespace,
    bases: BOTH,
    breakState: ({ places }) => mkdirSync(join(places.namespace, 'stray'), { mode: 0o700 }),
  },
  {
    name: 'an extra file in the namespace folder',
    where: (places) => places.namespace,
    bases: BOTH,
    breakState: ({ place, places }) => replaceFile(place.base, join(places.namespace, 'stray.json'), bytesOf('{}')),
  },
  // Rule 1: format and config, and what format names.
  {
    name: 'format.json naming another root',
    where: (places) => places.format,
    bases: BOTH,
    breakState: ({ place, places }) =>
      rewriteJson(places.format, (value) => ({ ...value, root: `${places.root}-other` }), { scratch: place.base }),
  },
  {
    name: 'format.json naming another state home',
    where: (places) => places.format,
    bases: BOTH,
    breakState: ({ place, places }) =>
      rewriteJson(places.format, (value) => ({ ...value, stateHome: join(place.base, 'other-state') }), {
        scratch: place.base,
      }),
  },
  {
    name: 'config.json changed, so format no longer names its bytes',
    where: (places) => places.config,
    bases: BOTH,
    // Still admits the registration's endpoint: only rule 1 is broken.
    breakState: ({ place, places }) =>
      rewriteJson(places.config, (value) => ({ ...value, endpoint: BOUND }), { scratch: place.base }),
  },
  {
    name: 'config.json with the same value in other (non-canonical) bytes',
    where: (places) => places.config,
    bases: BOTH,
    breakState: ({ place, places }) =>
      replaceFile(place.base, places.config, bytesOf(JSON.stringify(readJson(places.config), null, 2))),
  },
  {
    name: 'format.json missing from the service folder',
    where: (places) => places.format,
    bases: BOTH,
    breakState: ({ places }) => rmSync(places.format),
  },
  {
    name: 'config.json missing from the service folder',
    where: (places) => places.config,
    bases: BOTH,
    breakState: ({ places }) => rmSync(places.config),
  },
  // Rule 2: host-config.json.
  {
    name: 'host-config.json with another identity than the policy',
    where: (places) => places.hostConfig,
    bases: BOTH,
    breakState: ({ place, places }) => replaceFile(place.base, places.hostConfig, policyBytes('another policy')),
  },
  // Rule 3: the registration matches.
  {
    name: 'a registration of another root',
    where: (places) => places.registration,
    bases: BOTH,
    breakState: ({ place, places }) =>
      rewriteJson(places.registration, (value) => ({ ...value, root: `${places.root}-other` }), {
        scratch: place.base,
      }),
  },
  {
    name: 'a registration of another state home',
    where: (places) => places.registration,
    bases: BOTH,
    breakState: ({ place, places }) =>
      rewriteJson(places.registration, (value) => ({ ...value, stateHome: join(place.base, 'other-state') }), {
        scratch: place.base,
      }),
  },
  {
    name: 'a registration of another config identity',
    where: (places) => places.registration,
    bases: BOTH,
    breakState: ({ place, places }) =>
      rewriteJson(places.registration, (value) => ({ ...value, configIdentity: sha256Hex('another config') }), {
        scratch: place.base,
      }),
  },
  {
    name: 'a registration whose endpoint the config does not admit (another host)',
    where: (places) => places.registration,
    bases: BOTH,
    breakState: ({ place, places }) =>
      rewriteJson(places.registration, (value) => ({ ...value, endpoint: 'http://[::1]:40001' }), {
        scratch: place.base,
      }),
  },
  // Malformed or unsafe registration.
  {
    name: 'a registration that is not JSON',
    where: (places) => places.registration,
    bases: BOTH,
    breakState: ({ place, places }) => replaceFile(place.base, places.registration, bytesOf('{"schema":')),
  },
  {
    name: 'a registration with a duplicate key',
    where: (places) => places.registration,
    bases: BOTH,
    breakState: ({ place, places, registration }) =>
      replaceFile(place.base, places.registration, withDuplicateKey(places.registration, 'phase', registration.phase)),
  },
  {
    name: 'a registration with an unknown key',
    where: (places) => places.registration,
    bases: BOTH,
    breakState: ({ place, places }) =>
      rewriteJson(places.registration, (value) => ({ ...value, extra: 1 }), { scratch: place.base }),
  },
  {
    name: 'a registration with mode 0644',
    where: (places) => places.registration,
    bases: BOTH,
    breakState: ({ places }) => chmodSync(places.registration, 0o644),
  },
  {
    name: 'a symbolic link as owner.lock (to a private copy of a valid one)',
    where: (places) => places.ownerLock,
    bases: BOTH,
    breakState: ({ place, places, registration }) => {
      const target = join(place.base, 'owner-lock-copy');
      writeFileSync(target, ownerLockBytes(registration), { mode: 0o600 });
      rmSync(places.ownerLock, { force: true });
      symlinkSync(target, places.ownerLock);
    },
  },
  // Rule 4: a live registration's owner files, all agreeing with it.
  {
    name: 'owner.lock with another token',
    where: (places) => places.ownerLock,
    bases: ['live'],
    breakState: ({ place, places }) =>
      rewriteJson(places.ownerLock, (value) => ({ ...value, token: randomUUID() }), { scratch: place.base }),
  },
  {
    name: 'owner.lock with another pid',
    where: (places) => places.ownerLock,
    bases: ['live'],
    breakState: ({ place, places, registration }) =>
      rewriteJson(places.ownerLock, (value) => ({ ...value, pid: registration.pid === 1 ? 2 : 1 }), {
        scratch: place.base,
      }),
  },
  {
    name: 'owner.lock of another epoch',
    where: (places) => places.ownerLock,
    bases: ['live'],
    breakState: ({ place, places }) =>
      rewriteJson(places.ownerLock, (value) => ({ ...value, epoch: randomUUID() }), { scratch: place.base }),
  },
  {
    name: 'owner.lock of another host',
    where: (places) => places.ownerLock,
    bases: ['live'],
    breakState: ({ place, places }) =>
      rewriteJson(places.ownerLock, (value) => ({ ...value, host: 'another-host' }), { scratch: place.base }),
  },
  {
    name: 'a capability of another epoch',
    where: (places) => places.capability,
    bases: ['live'],
    breakState: ({ place, places }) =>
      rewriteJson(places.capability, (value) => ({ ...value, epoch: randomUUID() }), { scratch: place.base }),
  },
  {
    name: 'a companion of another epoch',
    where: (places) => places.companion,
    bases: ['live'],
    breakState: ({ place, places }) => replaceFile(place.base, places.companion, companionBytes(randomUUID())),
  },
  {
    name: 'a companion of another host',
    where: (places) => places.companion,
    bases: ['live'],
    breakState: ({ place, places, registration }) =>
      replaceFile(place.base, places.companion, companionBytes(registration.epoch, 'another-host')),
  },
  {
    name: 'a checkout lock of another token under a live registration',
    where: (places) => places.checkoutLock,
    bases: ['live'],
    breakState: ({ place, places }) =>
      rewriteJson(places.checkoutLock, (value) => ({ ...value, token: randomUUID() }), { scratch: place.base }),
  },
  {
    name: 'a checkout lock of another pid under a live registration',
    where: (places) => places.checkoutLock,
    bases: ['live'],
    breakState: ({ place, places, registration }) =>
      rewriteJson(places.checkoutLock, (value) => ({ ...value, pid: registration.pid === 1 ? 2 : 1 }), {
        scratch: place.base,
      }),
  },
  {
    name: 'a live registration without owner.lock',
    where: (places) => places.ownerLock,
    bases: ['live'],
    breakState: ({ places }) => rmSync(places.ownerLock),
  },
  {
    name: 'a live registration without its capability',
    where: (places) => places.capability,
    bases: ['live'],
    breakState: ({ places }) => rmSync(places.capability),
  },
  {
    name: 'a live registration without its checkout lock',
    where: (places) => places.checkoutLock,
    bases: ['live'],
    breakState: ({ places }) => rmSync(places.checkoutLock),
  },
  // Rule 5: no owner files without a live registration.
  {
    name: 'owner.lock under a stopped registration',
    where: (places) => places.ownerLock,
    bases: ['stopped'],
    breakState: ({ place, places, registration }) =>
      replaceFile(place.base, places.ownerLock, ownerLockBytes(registration)),
  },
  {
    name: 'a capability under a stopped registration',
    where: (places) => places.capability,
    bases: ['stopped'],
    breakState: ({ place, places, registration }) =>
      replaceFile(place.base, places.capability, capabilityBytes(registration.epoch)),
  },
  {
    name: 'a companion under a stopped registration',
    where: (places) => places.companion,
    bases: ['stopped'],
    breakState: ({ place, places, registration }) =>
      replaceFile(place.base, places.companion, companionBytes(registration.epoch)),
  },
  {
    name: "a checkout lock carrying the stopped registration's checkoutToken",
    where: (places) => places.checkoutLock,
    bases: ['stopped'],
    breakState: ({ place, places, registration }) =>
      replaceFile(place.base, places.checkoutLock, checkoutLockBytes(registration.checkoutToken)),
  },
];

/**
 * The acquire order (docs/ownership.md, "Acquire"): the registry's own refusals come first, so a
 * live owner's row answers `conflict` (an equal root) before the service
 * state is read; without a row, the state is read and checked, and a broken
 * rule answers `refused` before anything is judged from it.
 */
const ACQUIRE_CODE: Record<Base, string> = { live: 'conflict', stopped: 'refused' };

describe('a selected state that breaks a rule (docs/layout.md, "The selected state")', () => {
  for (const { name, bases, where, breakState } of cases) {
    for (const base of bases) {
      it(`${name} (${base}): inspect unavailable, acquire ${ACQUIRE_CODE[base]}, initialize and checkout refused, nothing changed`, async () => {
        const broken = await makeBase(base);
        breakState(broken);
        const { place, coordination } = broken;
        const before = stateTreeOf(place.stateHome);
        const rowsBefore = registryRows(place.stateHome);

        const inspection = inspectWorkspace(coordination);
        expect(inspection.status).toBe('unavailable');
        if (inspection.status !== 'unavailable') throw new Error('unreachable');
        expect(inspection.reason.startsWith(`refused: ${where(broken.places)}: `)).toBe(true);
        expect(codeOf(() => workspaceLocalAccess(coordination))).toBe('unavailable');
        expect(codeOf(() => workspaceConfiguration(coordination))).toBe('refused');

        expect(
          await unchangedCodeOf(place.stateHome, () =>
            acquireWorkspace(coordination, ANY_PORT, 'http://127.0.0.1:40002'),
          ),
        ).toBe(ACQUIRE_CODE[base]);
        expect(await unchangedCodeOf(place.stateHome, () => initializeWorkspace(coordination, ANY_PORT))).toBe(
          'refused',
        );
        const checkout = new Checkout(coordination.root, { stateHome: place.stateHome });
        expect(await unchangedCodeOf(place.stateHome, () => checkout.acquire())).toBe('refused');

        // A second coordination of the same root sees the same thing.
        const fresh = openWorkspace(coordination.root, { stateHome: place.stateHome });
        expect(inspectWorkspace(fresh)).toEqual(inspection);
        expect(stateTreeOf(place.stateHome)).toEqual(before);
        expect(registryRows(place.stateHome)).toEqual(rowsBefore);
      });
    }
  }
});

describe('the selected state\'s rule 5 without any registration (docs/layout.md, "The selected state")', () => {
  const strays: readonly { name: string; path: (places: WorkspacePlaces) => string; bytes: () => Uint8Array }[] = [
    {
      name: 'owner.lock',
      path: (places) => places.ownerLock,
      bytes: () =>
        encode({
          schema: 'leasehold.owner-lock/1',
          epoch: randomUUID(),
          token: randomUUID(),
          ...currentProcess(),
          processStart: undefined,
        }),
    },
    {
      name: 'a capability',
      path: (places) => places.capability,
      bytes: () => capabilityBytes(randomUUID()),
    },
    {
      name: 'a companion',
      path: (places) => places.companion,
      bytes: () => companionBytes(randomUUID()),
    },
  ];
  for (const { name, path, bytes } of strays) {
    it(`refuses ${name} in an initialised service folder that has no registration`, async () => {
      const place = makePlace('coordination');
      const coordination = coordinationFor(place, 'initialised');
      await initializeWorkspace(coordination, ANY_PORT);
      expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: null });
      replaceFile(place.base, path(coordination.places), bytes());
      const inspection = inspectWorkspace(coordination);
      expect(inspection).toMatchObject({ status: 'unavailable' });
      if (inspection.status !== 'unavailable') throw new Error('unreachable');
      expect(inspection.reason.startsWith(`refused: ${path(coordination.places)}: `)).toBe(true);
      expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, BOUND))).toBe(
        'refused',
      );
      expect(await unchangedCodeOf(place.stateHome, () => initializeWorkspace(coordination, ANY_PORT))).toBe('refused');
    });
  }
});

describe('what the rules allow', () => {
  it("allows a plain tool's own checkout lock under a stopped registration: stopped, and acquire is conflict", async () => {
    const { place, coordination } = await makeBase('stopped');
    const handle = await new Checkout(coordination.root, { stateHome: place.stateHome }).acquire();
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: expect.any(String) as string });
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, BOUND))).toBe(
      'conflict',
    );
    handle.release();
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    lease.assert();
  });

  it("never reads the service's own access-config.json, access.json and history/", async () => {
    for (const base of BOTH) {
      const { place, places, coordination } = await makeBase(base);
      const before = inspectWorkspace(coordination);
      replaceFile(place.base, join(places.service, 'access-config.json'), bytesOf('not json at all'));
      replaceFile(place.base, join(places.service, 'access.json'), bytesOf('{"a":1,"a":2}'));
      mkdirSync(join(places.service, 'history'), { mode: 0o700 });
      replaceFile(place.base, join(places.service, 'history', 'anything'), bytesOf('{}'));
      expect(inspectWorkspace(coordination)).toEqual(before);
    }
  });

  it('allows a service folder without host-config.json', async () => {
    const place = makePlace('coordination');
    const coordination = coordinationFor(place, 'no-host-config');
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    expect(inspectWorkspace(coordination)).toMatchObject({
      status: 'unavailable',
      owner: { epoch: lease.registration.epoch },
    });
    await lease.release();
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
  });
});

describe('the acquire order around a valid state (docs/ownership.md, "Acquire")', () => {
  it('answers quarantine for a live registration whose row was removed by hand, and refused when a rule is broken too', async () => {
    const { place, places, coordination } = await makeBase('live');
    replaceFile(
      place.base,
      registryPaths(place.stateHome).roots,
      encode({ schema: 'leasehold.registry/1', entries: [] }),
    );
    expect(inspectWorkspace(coordination)).toMatchObject({
      status: 'unavailable',
      reason: 'the registry row is not the registration',
    });
    expect(codeOf(() => workspaceLocalAccess(coordination))).toBe('unavailable');
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, BOUND))).toBe(
      'quarantine',
    );
    // The state is read and checked before its phase is judged: a broken rule comes first.
    replaceFile(place.base, join(places.service, 'stray.json'), bytesOf('{}'));
    expect(await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, ANY_PORT, BOUND))).toBe(
      'refused',
    );
  });

  it('answers conflict for a stopped workspace whose plain checkout lock is held and whose config differs', async () => {
    const { place, coordination } = await makeBase('stopped');
    await new Checkout(coordination.root, { stateHome: place.stateHome }).acquire();
    const other = { ...ANY_PORT, endpoint: 'http://[::1]:0' };
    expect(
      await unchangedCodeOf(place.stateHome, () => acquireWorkspace(coordination, other, 'http://[::1]:40001')),
    ).toBe('conflict');
  });
});
