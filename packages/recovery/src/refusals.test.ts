import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { DOCUMENT_BYTES, decodeBytes, encode, registryLockSchema } from '@leasehold/contracts';
import { currentProcess } from '@leasehold/private-files';
import {
  cleanUp,
  codeOf,
  codeOfAsync,
  handPlaces,
  makeWorkspace,
  messageOf,
  pathExists,
  replaceFile,
  serviceFences,
  stateListing,
} from '@leasehold/test-utils';
import {
  OWNER_CONFIG,
  PARENT_ENDPOINT,
  coordinationOf,
  deadOwner,
  errorOf,
  grant,
  journalRecords,
  liveOwner,
  makePlace,
  ownerPlan,
  spawnFixture,
  writeByHand,
  type RecovererPlan,
  type TestPlace,
} from '../test/helpers.js';
import { prepareRecoveryRelease, recover, recoverySnapshot } from './index.js';

afterEach(cleanUp);

/** A denial of authority, as an operator tool would throw it. */
class AuthorityDenied extends Error {
  override readonly name = 'AuthorityDenied';
}

/** A durable bridge that is down, as a replicated journal would report it. */
class BridgeDown extends Error {
  override readonly name = 'BridgeDown';
}

/** A fresh place with one workspace whose owner acquired it and was killed while idle. */
async function deadOwnerPlace(): Promise<{ place: TestPlace; root: string; pid: number }> {
  const place = makePlace();
  const root = makeWorkspace(place, 'workspace');
  const { pid } = await deadOwner(place, root);
  return { place, root, pid };
}

/** The fences a dead idle owner leaves, by hand: everything but a registry lock. */
const IDLE_OWNER_FENCES = ['registry row', 'owner.lock', 'local-capability.json', 'registration (idle)'];

/** Finishes with a new snapshot: recovered, `stopped`, and a new owner acquires and releases. */
async function finishRecovery(place: TestPlace, root: string): Promise<void> {
  const coordination = coordinationOf(place, root);
  const snapshot = recoverySnapshot(coordination);
  for (const { status } of snapshot.holders) expect(status).toBe('absent');
  expect(await recover(coordination, { expectedDigest: snapshot.digest, assertAuthority: grant })).toMatchObject({ recovered: true });
  expect(serviceFences(place.stateHome, root)).toEqual([]);
  expect(pathExists(handPlaces(place.stateHome, root).checkoutLock)).toBe(false);
  expect(coordination.inspect().status).toBe('stopped');
  await (await coordination.acquire(OWNER_CONFIG, PARENT_ENDPOINT)).release();
  expect(coordination.inspect().status).toBe('stopped');
}

/** Writes a registry lock by hand, as a writer on another host or in another container would leave it. */
function lockByHand(place: TestPlace, holder: { pid: number; host: string; processStart?: string }): void {
  const lock = { schema: 'leasehold.registry-lock/1', token: randomUUID(), ...holder, retained: false };
  writeByHand(handPlaces(place.stateHome, '/').registryLock, encode(lock));
}

/** This boot's id, PID namespace and start time, from this process's `processStart`. */
function processStartParts(): { bootId: string; pidNamespace: string; startTime: string } {
  const match = /^linux:([0-9a-f-]{36}):([0-9]+):([0-9]+)$/.exec(currentProcess().processStart ?? '');
  if (match === null) throw new Error('these tests need a Linux process start');
  return { bootId: match[1]!, pidNamespace: match[2]!, startTime: match[3]! };
}

describe('holders: only absent ones are recovered (SPEC 6)', () => {
  it('a live holder is quarantine, named with its pid, and nothing changes', async () => {
    const place = makePlace();
    const root = makeWorkspace(place, 'workspace');
    const owner = await liveOwner(place, root);
    const coordination = coordinationOf(place, root);
    const snapshot = recoverySnapshot(coordination);
    expect(snapshot.holders.map(({ holder, status }) => [holder.pid, status])).toEqual([[owner.pid, 'live']]);
    const before = stateListing(place.stateHome);

    const prepared = await errorOf(() => prepareRecoveryRelease(coordination, snapshot.digest, grant));
    expect(prepared).toMatchObject({ code: 'quarantine' });
    expect((prepared as Error).message).toContain(`process ${owner.pid} on ${hostname()} is live`);
    const recovered = await errorOf(() => recover(coordination, { expectedDigest: snapshot.digest, assertAuthority: grant }));
    expect(recovered).toMatchObject({ code: 'quarantine' });
    expect((recovered as Error).message).toContain(`process ${owner.pid}`);

    expect(stateListing(place.stateHome)).toEqual(before);
    expect(journalRecords(place.stateHome)).toEqual([]);
    expect(coordination.inspect()).toMatchObject({ status: 'unavailable', owner: { pid: owner.pid, phase: 'idle' } });
  });

  const ambiguous = [
    { name: 'a registry lock naming another host', holder: () => ({ pid: 4242, host: 'elsewhere.invalid' }) },
    {
      name: 'a registry lock naming another PID namespace of this host',
      holder: () => {
        const { bootId, pidNamespace, startTime } = processStartParts();
        return { pid: process.pid, host: hostname(), processStart: `linux:${bootId}:${BigInt(pidNamespace) + 1n}:${startTime}` };
      },
    },
  ];
  for (const { name, holder } of ambiguous) {
    it(`an ambiguous holder (${name}) is quarantine, and nothing changes`, async () => {
      const { place, root } = await deadOwnerPlace();
      const named = holder();
      lockByHand(place, named);
      const coordination = coordinationOf(place, root);
      const snapshot = recoverySnapshot(coordination);
      expect(snapshot.fences[0]).toMatchObject({ kind: 'registry-lock', holder: named });
      expect(snapshot.holders.find(({ holder: { pid } }) => pid === named.pid)?.status).toBe('ambiguous');
      const before = stateListing(place.stateHome);

      for (const attempt of [
        () => prepareRecoveryRelease(coordination, snapshot.digest, grant),
        () => recover(coordination, { expectedDigest: snapshot.digest, assertAuthority: grant }),
      ]) {
        const error = await errorOf(attempt);
        expect(error).toMatchObject({ code: 'quarantine' });
        expect((error as Error).message).toContain(`process ${named.pid} on ${named.host} is ambiguous`);
      }
      expect(stateListing(place.stateHome)).toEqual(before);
      expect(coordination.inspect().status).toBe('unavailable');
    });
  }

  it('a registry lock of another boot names a holder that is absent: recovered (the reboot case)', async () => {
    const { place, root } = await deadOwnerPlace();
    const { pidNamespace, startTime } = processStartParts();
    const named = { pid: process.pid, host: hostname(), processStart: `linux:${randomUUID()}:${pidNamespace}:${startTime}` };
    lockByHand(place, named);
    const coordination = coordinationOf(place, root);
    expect(recoverySnapshot(coordination).holders.find(({ holder: { pid } }) => pid === named.pid)?.status).toBe('absent');
    await finishRecovery(place, root);
  });
});

describe('the digest: only the state the operator saw (SPEC 6)', () => {
  const rewritten = [
    { name: 'registration.json', path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).registration },
    { name: 'local-capability.json', path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).capability },
    { name: 'owner.lock', path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).ownerLock },
    { name: 'checkout.lock', path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).checkoutLock },
    { name: 'roots.json', path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).roots },
    { name: 'registry format.json', path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).registryFormat },
  ];
  for (const { name, path } of rewritten) {
    it(`is stale (conflict) once ${name} is rewritten with identical bytes, and nothing changes`, async () => {
      const { place, root } = await deadOwnerPlace();
      const coordination = coordinationOf(place, root);
      const stale = recoverySnapshot(coordination).digest;
      const file = path(place, root);
      replaceFile(place.scratch, file, readFileSync(file));
      const fresh = recoverySnapshot(coordination).digest;
      expect(fresh).not.toBe(stale);
      const before = stateListing(place.stateHome);

      expect(codeOf(() => prepareRecoveryRelease(coordination, stale, grant))).toBe('conflict');
      expect(await codeOfAsync(recover(coordination, { expectedDigest: stale, assertAuthority: grant }))).toBe('conflict');
      expect(stateListing(place.stateHome)).toEqual(before);
      expect(journalRecords(place.stateHome)).toEqual([]);
      expect(serviceFences(place.stateHome, root)).toEqual(IDLE_OWNER_FENCES);

      // The new digest is the one to confirm.
      expect(await recover(coordination, { expectedDigest: fresh, assertAuthority: grant })).toMatchObject({ recovered: true });
      expect(coordination.inspect().status).toBe('stopped');
    });
  }

  for (const { name, path } of rewritten) {
    it(`is checked again under the registry lock: ${name} rewritten between the grant and its release is conflict`, async () => {
      const { place, root } = await deadOwnerPlace();
      const coordination = coordinationOf(place, root);
      const grantMade = prepareRecoveryRelease(coordination, recoverySnapshot(coordination).digest, grant);
      const file = path(place, root);
      replaceFile(place.scratch, file, readFileSync(file));
      const before = stateListing(place.stateHome);
      let crossings = 0;
      expect(
        await codeOfAsync(
          grantMade.release(() => {
            crossings += 1;
          }),
        ),
      ).toBe('conflict');
      expect(crossings).toBe(1);
      expect(stateListing(place.stateHome)).toEqual(before);
      expect(serviceFences(place.stateHome, root)).toEqual(IDLE_OWNER_FENCES);
      await finishRecovery(place, root);
    });
  }

  it('a malformed digest is refused before authority is asked, and nothing changes', async () => {
    const { place, root } = await deadOwnerPlace();
    const coordination = coordinationOf(place, root);
    const digest = recoverySnapshot(coordination).digest;
    const before = stateListing(place.stateHome);
    let asked = 0;
    const counted = () => {
      asked += 1;
    };
    for (const malformed of ['', 'not a digest', digest.slice(1), `${digest}0`, digest.toUpperCase(), `${digest.slice(0, 63)}g`]) {
      expect(codeOf(() => prepareRecoveryRelease(coordination, malformed, counted)), malformed).toBe('refused');
      expect(await codeOfAsync(recover(coordination, { expectedDigest: malformed, assertAuthority: counted })), malformed).toBe('refused');
    }
    expect(asked).toBe(0);
    expect(stateListing(place.stateHome)).toEqual(before);
  });
});

describe('authority and the one-shot grant (SPEC 6)', () => {
  it('authority denied: the operator tool error itself, and nothing changes', async () => {
    const { place, root } = await deadOwnerPlace();
    const coordination = coordinationOf(place, root);
    const digest = recoverySnapshot(coordination).digest;
    const before = stateListing(place.stateHome);
    const denial = new AuthorityDenied('not allowed to recover this workspace');
    const deny = () => {
      throw denial;
    };
    expect(await errorOf(() => prepareRecoveryRelease(coordination, digest, deny))).toBe(denial);
    expect(await errorOf(() => recover(coordination, { expectedDigest: digest, assertAuthority: deny }))).toBe(denial);
    expect(stateListing(place.stateHome)).toEqual(before);
    expect(serviceFences(place.stateHome, root)).toEqual(IDLE_OWNER_FENCES);
  });

  it('a grant is used once: a second release is consumed-grant, after a success or a failure', async () => {
    const { place, root } = await deadOwnerPlace();
    const coordination = coordinationOf(place, root);
    const digest = recoverySnapshot(coordination).digest;

    // A failure consumes it too.
    const failing = prepareRecoveryRelease(coordination, digest, grant);
    const down = new BridgeDown('journal unreachable');
    expect(
      await errorOf(() =>
        failing.release(() => {
          throw down;
        }),
      ),
    ).toBe(down);
    expect(await codeOfAsync(failing.release(() => {}))).toBe('consumed-grant');
    expect(serviceFences(place.stateHome, root)).toEqual(IDLE_OWNER_FENCES);

    const granted = prepareRecoveryRelease(coordination, recoverySnapshot(coordination).digest, grant);
    let calls = 0;
    await granted.release(() => {
      calls += 1;
    });
    // Once before the first effect, then once before each of the five effects.
    expect(calls).toBe(6);
    expect(coordination.inspect().status).toBe('stopped');
    const after = stateListing(place.stateHome);
    expect(await codeOfAsync(granted.release(() => {}))).toBe('consumed-grant');
    expect(stateListing(place.stateHome)).toEqual(after);
  });
});

describe('a durable bridge that fails stops recovery with the remaining fences in place (SPEC 6, 8.5)', () => {
  it('before the first effect, with a fresh registry lock: the lock is removed and nothing else changed', async () => {
    const { place, root } = await deadOwnerPlace();
    const coordination = coordinationOf(place, root);
    const grantMade = prepareRecoveryRelease(coordination, recoverySnapshot(coordination).digest, grant);
    const before = stateListing(place.stateHome);
    const down = new BridgeDown('journal unreachable');
    let calls = 0;
    const bridge = () => {
      calls += 1;
      throw down;
    };
    expect(await errorOf(() => grantMade.release(bridge))).toBe(down);
    expect(calls).toBe(1);
    expect(pathExists(handPlaces(place.stateHome, root).registryLock)).toBe(false);
    expect(stateListing(place.stateHome)).toEqual(before);
    expect(serviceFences(place.stateHome, root)).toEqual(IDLE_OWNER_FENCES);
    await finishRecovery(place, root);
  });

  it("before the first effect, with a taken-over lock: the dead holder's lock is put back byte-identical", async () => {
    const place = makePlace();
    const root = makeWorkspace(place, 'workspace');
    // An owner killed inside release after taking the registry lock (release steps 1-5), before its first write.
    const owner = spawnFixture('owner.mjs', ownerPlan(place, root, 'release', 6));
    expect(await owner.closed).toMatchObject({ code: null, signal: 'SIGKILL' });
    const places = handPlaces(place.stateHome, root);
    const coordination = coordinationOf(place, root);
    const grantMade = prepareRecoveryRelease(coordination, recoverySnapshot(coordination).digest, grant);
    const before = stateListing(place.stateHome);
    const lockBefore = before['v1/registry/registry.lock'];
    expect(lockBefore).toMatchObject({ kind: 'file' });
    const down = new BridgeDown('journal unreachable');
    expect(
      await errorOf(() =>
        grantMade.release(() => {
          throw down;
        }),
      ),
    ).toBe(down);

    const after = stateListing(place.stateHome);
    const lockAfter = after['v1/registry/registry.lock'];
    // Put back by a rename of a staged copy: the same bytes (a new file, though the freed inode number may be reused).
    expect(lockAfter).toMatchObject({ kind: 'file', bytes: (lockBefore as { bytes: string }).bytes });
    const withoutLock = (listing: typeof before) => Object.fromEntries(Object.entries(listing).filter(([name]) => name !== 'v1/registry/registry.lock'));
    expect(withoutLock(after)).toEqual(withoutLock(before));
    expect(decodeBytes(registryLockSchema, readFileSync(places.registryLock), DOCUMENT_BYTES, 'registry.lock')).toMatchObject({
      pid: owner.pid,
      retained: false,
    });
    expect(serviceFences(place.stateHome, root)).toEqual(['registry.lock', ...IDLE_OWNER_FENCES]);
    await finishRecovery(place, root);
  });

  // The bridge is crossed once before the first effect, then before each effect:
  // 1 start, 2 registration stopped, 3 row removed, 4 capability removed, 5 owner.lock removed, 6 checkout lock removed.
  // A recovery run in a child that then exits, so that the lock it keeps names a process that is gone.
  const remainingAfter: Record<number, string[]> = {
    1: IDLE_OWNER_FENCES,
    2: IDLE_OWNER_FENCES,
    3: ['registry.lock', 'registry row', 'owner.lock', 'local-capability.json'],
    4: ['registry.lock', 'owner.lock', 'local-capability.json'],
    5: ['registry.lock', 'owner.lock'],
    6: ['registry.lock'],
  };
  it('at every crossing (in a child that then exits): stops there, the remaining fences and a retained lock stay', async () => {
    for (let failAt = 1; failAt <= 7; failAt += 1) {
      const { place, root } = await deadOwnerPlace();
      const places = handPlaces(place.stateHome, root);
      const coordination = coordinationOf(place, root);
      const plan: RecovererPlan = {
        workspace: root,
        stateHome: place.stateHome,
        scratch: place.scratch,
        digest: recoverySnapshot(coordination).digest,
        bridgeFailsAt: failAt,
      };
      const before = stateListing(place.stateHome);
      const child = spawnFixture('recoverer.mjs', plan);
      const reported = await messageOf(child, 'failed');
      expect(await child.closed).toMatchObject({ code: 0, signal: null });
      if (failAt === 7) {
        // There is no seventh crossing: the recovery completes.
        expect(reported).toEqual({ failed: null, calls: 6 });
        expect(serviceFences(place.stateHome, root)).toEqual([]);
        expect(coordination.inspect().status).toBe('stopped');
        await cleanUp();
        continue;
      }
      expect(reported, `fails at ${failAt}`).toEqual({ failed: 'the durable bridge is down', calls: failAt });
      expect(serviceFences(place.stateHome, root), `fails at ${failAt}`).toEqual(remainingAfter[failAt]);
      expect(pathExists(places.checkoutLock), `fails at ${failAt}: the checkout lock goes last`).toBe(true);
      expect(['absent', 'stopped'], `fails at ${failAt}`).not.toContain(coordination.inspect().status);
      if (failAt <= 2) {
        // Nothing written: its fresh lock was removed, and nothing else changed.
        expect(stateListing(place.stateHome), `fails at ${failAt}`).toEqual(before);
      } else {
        const lock = decodeBytes(registryLockSchema, readFileSync(places.registryLock), DOCUMENT_BYTES, 'registry.lock');
        expect(lock, `fails at ${failAt}`).toMatchObject({ pid: child.pid, retained: true });
        expect(await codeOfAsync(coordination.acquire(OWNER_CONFIG, PARENT_ENDPOINT)), `fails at ${failAt}`).toBe('quarantine');
      }
      await finishRecovery(place, root);
      await cleanUp();
    }
  });

  it('between effects in this process: the retained lock names a live process (this one), so a new recovery is quarantine', async () => {
    const { place, root } = await deadOwnerPlace();
    const places = handPlaces(place.stateHome, root);
    const coordination = coordinationOf(place, root);
    const grantMade = prepareRecoveryRelease(coordination, recoverySnapshot(coordination).digest, grant);
    const down = new BridgeDown('journal unreachable');
    let calls = 0;
    const bridge = () => {
      calls += 1;
      if (calls === 3) throw down;
    };
    expect(await errorOf(() => grantMade.release(bridge))).toBe(down);
    expect(serviceFences(place.stateHome, root)).toEqual(remainingAfter[3]);
    const lock = decodeBytes(registryLockSchema, readFileSync(places.registryLock), DOCUMENT_BYTES, 'registry.lock');
    expect(lock).toMatchObject({ pid: process.pid, retained: true });

    // The failed recovery's process is this test process, still running: its retained lock
    // cannot be proven abandoned, so recovery refuses until this process has exited (the
    // child-process test above shows the recovery that follows).
    const snapshot = recoverySnapshot(coordination);
    expect(snapshot.holders.find(({ holder }) => holder.pid === process.pid)?.status).toBe('live');
    const refused = await errorOf(() => recover(coordination, { expectedDigest: snapshot.digest, assertAuthority: grant }));
    expect(refused).toMatchObject({ code: 'quarantine' });
    expect((refused as Error).message).toContain(`process ${process.pid} on ${hostname()} is live`);
    expect(serviceFences(place.stateHome, root)).toEqual(remainingAfter[3]);
  });

  for (const how of ['remove', 'rewrite'] as const) {
    it(`a journal record ${how === 'remove' ? 'removed' : 'rewritten with identical bytes'} between effects stops it: conflict, fences remain`, async () => {
      const { place, root } = await deadOwnerPlace();
      const places = handPlaces(place.stateHome, root);
      const coordination = coordinationOf(place, root);
      // Right after the first effect's last step (the service folder's fsync after the registration's rename).
      const plan: RecovererPlan = {
        workspace: root,
        stateHome: place.stateHome,
        scratch: place.scratch,
        digest: recoverySnapshot(coordination).digest,
        tamper: { at: { operation: 'replace', action: 'fsync-directory', path: places.service }, how },
      };
      const child = spawnFixture('recoverer.mjs', plan);
      expect(await messageOf(child, 'tampered')).toEqual({ tampered: how });
      expect(await messageOf(child, 'failed')).toEqual({ failed: 'conflict' });
      expect(await child.closed).toMatchObject({ code: 0, signal: null });

      expect(serviceFences(place.stateHome, root)).toEqual(remainingAfter[3]);
      expect(pathExists(places.checkoutLock)).toBe(true);
      const lock = decodeBytes(registryLockSchema, readFileSync(places.registryLock), DOCUMENT_BYTES, 'registry.lock');
      expect(lock).toMatchObject({ pid: child.pid, retained: true });
      expect(journalRecords(place.stateHome)).toHaveLength(how === 'remove' ? 0 : 1);
      await finishRecovery(place, root);
    });
  }
});
