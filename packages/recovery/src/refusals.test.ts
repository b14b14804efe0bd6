import { randomUUID } from 'node:crypto';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { encode, recoverRemedy } from '@leasehold/contracts';
import { currentProcess } from '@leasehold/private-files';
import { acquireWorkspace, inspectWorkspace } from '@leasehold/coordination';
import {
  cleanUp,
  codeOf,
  codeOfAsync,
  handPlaces,
  jsonOf,
  loopbackEndpoint,
  makePlace,
  makeWorkspace,
  namesIn,
  pathExists,
  replaceFile,
  rewriteJson,
  serviceFences,
  spawnSharedFixture,
  stateListing,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  FIXTURE_MODULES,
  OWNER_CONFIG,
  coordinationOf,
  deadOwner,
  errorOf,
  finishRecovery,
  grantOf,
  journalRecords,
  liveOwner,
  ownerPlan,
  recoverWith,
  rowsOf,
  viewOf,
  writeByHand,
} from '../test/helpers.js';
import { recover, type RecoveryGrant } from './recover.js';

afterEach(cleanUp);

// Recovery (docs/ownership.md, "Recovery: grant and release") acts only for absent holders, only with the
// current digest, only once; authority and the durable bridge are crossed
// before every effect, and a failure of either stops it with the remaining
// fences in place. A failed recovery never leaves a registry lock behind.

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
  const place = makePlace('recovery');
  const root = makeWorkspace(place, 'workspace');
  const { pid } = await deadOwner(place, root);
  return { place, root, pid };
}

/** The service fences a dead idle owner leaves (docs/ownership.md, "Words"), by hand. */
const IDLE_OWNER_FENCES = [
  'registry row',
  'owner.lock',
  'local-capability.json',
  'registration (idle)',
  "checkout.lock (a registration's)",
  'folder mark',
];

/** The names in the registry folder: no lock and no take-over marker once every writer is done. */
function registryFolder(place: TestPlace): string[] {
  return namesIn(dirname(handPlaces(place.stateHome, '/').registryLock));
}

/** Writes a registry lock by hand, as a writer on another host, in another container or before a reboot would leave it. */
function lockByHand(
  place: TestPlace,
  root: string,
  holder: { pid: number; host: string; processStart?: string },
): Buffer {
  const bytes = Buffer.from(encode({ schema: 'leasehold.registry-lock/1', token: randomUUID(), ...holder, root }));
  writeByHand(handPlaces(place.stateHome, '/').registryLock, bytes);
  return bytes;
}

/** This boot's id, PID namespace and start time, from this process's `processStart`. */
function processStartParts(): { bootId: string; pidNamespace: string; startTime: string } {
  const match = /^linux:([0-9a-f-]{36}):([0-9]+):([0-9]+)$/.exec(currentProcess().processStart ?? '');
  if (match === null) throw new Error('these tests need a Linux process start');
  return { bootId: match[1]!, pidNamespace: match[2]!, startTime: match[3]! };
}

/** The same process start in another PID namespace of this boot: `ambiguous`. */
function inAnotherPidNamespace(processStart: string): string {
  const { pidNamespace } = processStartParts();
  return processStart.replace(`:${pidNamespace}:`, `:${BigInt(pidNamespace) + 1n}:`);
}

describe('holders: only absent ones are recovered (docs/ownership.md, "Recovery: grant and release")', () => {
  it('a live holder is quarantine, named with its pid, and nothing changes', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'workspace');
    const owner = await liveOwner(place, root);
    const snapshot = viewOf(place, root);
    expect(snapshot.holders.map(({ holder, verdict }) => [holder.pid, verdict])).toEqual([[owner.pid, 'live']]);
    const before = stateListing(place.stateHome);

    const prepared = await errorOf(() => grantOf(place, root, snapshot.digest));
    expect(prepared).toMatchObject({ code: 'quarantine', remedy: recoverRemedy(root, place.stateHome, 'live') });
    expect((prepared as Error).message).toContain(`process ${owner.pid} on ${hostname()} is live`);
    const recovered = await errorOf(() => recoverWith(place, root, snapshot.digest));
    expect(recovered).toMatchObject({ code: 'quarantine' });
    expect((recovered as Error).message).toContain(`process ${owner.pid}`);

    expect(stateListing(place.stateHome)).toEqual(before);
    expect(journalRecords(place.stateHome)).toEqual([]);
    expect(inspectWorkspace(coordinationOf(place, root))).toMatchObject({
      status: 'unavailable',
      owner: { pid: owner.pid, phase: 'idle' },
    });
  });

  const ambiguous = [
    {
      name: 'another host',
      change: (registration: Record<string, unknown>) => ({ ...registration, host: 'elsewhere.invalid' }),
    },
    {
      name: 'another PID namespace of this host',
      change: (registration: Record<string, unknown>) => ({
        ...registration,
        processStart: inAnotherPidNamespace(String(registration.processStart)),
      }),
    },
  ];
  for (const { name, change } of ambiguous) {
    it(`an ambiguous holder (a registration naming ${name}) is quarantine, and nothing changes`, async () => {
      const { place, root, pid } = await deadOwnerPlace();
      const registration = handPlaces(place.stateHome, root).registration;
      rewriteJson(registration, change, { scratch: place.base });
      const named = jsonOf(registration) as { host: string };
      const snapshot = viewOf(place, root);
      expect(snapshot.fences.find((fence) => fence.kind === 'registration')).toMatchObject({
        holder: { pid, host: named.host },
      });
      expect(snapshot.holders.map(({ verdict }) => verdict)).toContain('ambiguous');
      const before = stateListing(place.stateHome);

      for (const attempt of [
        () => grantOf(place, root, snapshot.digest),
        () => recoverWith(place, root, snapshot.digest),
      ]) {
        const error = await errorOf(attempt);
        expect(error).toMatchObject({ code: 'quarantine', remedy: recoverRemedy(root, place.stateHome, 'ambiguous') });
        expect((error as Error).message).toContain(`process ${pid} on ${named.host} is ambiguous`);
      }
      expect(stateListing(place.stateHome)).toEqual(before);
      expect(journalRecords(place.stateHome)).toEqual([]);
      expect(inspectWorkspace(coordinationOf(place, root)).status).toBe('unavailable');
    });
  }
});

describe('registry locks: not a fence; a dead writer\'s is taken over by recovery\'s own transaction (docs/ownership.md, "Taking over a dead registry lock")', () => {
  it('a lock of another boot names an absent holder: recovery takes it over (the reboot case)', async () => {
    const { place, root } = await deadOwnerPlace();
    const { pidNamespace, startTime } = processStartParts();
    lockByHand(place, '/elsewhere', {
      pid: process.pid,
      host: hostname(),
      processStart: `linux:${randomUUID()}:${pidNamespace}:${startTime}`,
    });
    const snapshot = viewOf(place, root);
    // Neither a fence nor a holder of this workspace.
    expect(snapshot.fences.map((fence) => fence.path)).not.toContain(handPlaces(place.stateHome, root).registryLock);
    expect(snapshot.holders.map(({ holder }) => holder.pid)).not.toContain(process.pid);
    expect(await recoverWith(place, root, snapshot.digest)).toMatchObject({ recovered: true });
    expect(registryFolder(place)).toEqual(['format.json', 'roots.json']);
    expect(serviceFences(place.stateHome, root)).toEqual([]);
    await (await acquireWorkspace(coordinationOf(place, root), OWNER_CONFIG, loopbackEndpoint(45_030))).release();
  });

  // One test each way: each stands alone, with its own dead owner.
  for (const bridgeFails of [true, false]) {
    const how = bridgeFails ? 'its bridge fails inside the transaction' : 'recovery succeeds';
    it(`a dead owner's lock left inside its release: taken over and removed when ${how}`, async () => {
      const place = makePlace('recovery');
      const root = makeWorkspace(place, 'workspace');
      // Killed in release's transaction, after taking the lock, before the row's removal was renamed into place.
      const owner = spawnSharedFixture(
        'crasher',
        {
          ...ownerPlan(place, root, 'release'),
          killBefore: { operation: 'replace', action: 'rename', path: handPlaces(place.stateHome, root).roots },
        },
        FIXTURE_MODULES,
      );
      expect(await owner.closed).toMatchObject({ code: null, signal: 'SIGKILL' });
      const places = handPlaces(place.stateHome, root);
      expect(jsonOf(places.registryLock)).toMatchObject({ pid: owner.pid, root });
      expect(serviceFences(place.stateHome, root)).toEqual(['registry row', "checkout.lock (a registration's)"]);
      const granted = grantOf(place, root, viewOf(place, root).digest);
      let crossings = 0;
      const down = new BridgeDown('journal unreachable');
      const outcome = await errorOf(async () => {
        await granted.release(() => {
          crossings += 1;
          // Crossing 1 is before the transaction, 2 inside it before the row's removal.
          if (bridgeFails && crossings === 2) throw down;
        });
        throw new Error('recovered');
      });
      expect(registryFolder(place), `bridge fails: ${bridgeFails}`).toEqual(['format.json', 'roots.json']);
      if (bridgeFails) {
        expect(outcome).toBe(down);
        expect(serviceFences(place.stateHome, root)).toEqual(['registry row', "checkout.lock (a registration's)"]);
        // The failed recovery's process (this one) recovers again at once: it left no lock of its own.
        await finishRecovery(place, root);
      } else {
        expect(outcome).toMatchObject({ message: 'recovered' });
        expect(crossings).toBe(3);
        expect(serviceFences(place.stateHome, root)).toEqual([]);
        expect(inspectWorkspace(coordinationOf(place, root)).status).toBe('stopped');
      }
    });
  }

  it('a lock whose holder is ambiguous stops recovery at its transaction: quarantine, naming it; the row and checkout lock stay', async () => {
    const { place, root } = await deadOwnerPlace();
    const places = handPlaces(place.stateHome, root);
    const lockBytes = lockByHand(place, '/elsewhere', { pid: 4242, host: 'elsewhere.invalid' });
    const snapshot = viewOf(place, root);
    const error = await errorOf(() => recoverWith(place, root, snapshot.digest));
    expect(error).toMatchObject({ code: 'quarantine' });
    expect((error as Error).message).toContain('pid 4242 on elsewhere.invalid');
    // The effects before the transaction ran; the row and the checkout lock, which go in it, stay.
    expect(serviceFences(place.stateHome, root)).toEqual(['registry row', "checkout.lock (a registration's)"]);
    expect(readFileSync(places.registryLock).equals(lockBytes)).toBe(true);
    expect(journalRecords(place.stateHome)).toHaveLength(1);
    expect(inspectWorkspace(coordinationOf(place, root)).status).toBe('unavailable');
    // The operator made sure that process is gone, and removed its lock (as `leasehold doctor` says).
    rmSync(places.registryLock);
    await finishRecovery(place, root);
  });
});

describe('the digest: only the state the operator saw (docs/ownership.md, "Recovery: snapshot and digest")', () => {
  const rewritten = [
    {
      name: 'registration.json',
      path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).registration,
    },
    {
      name: 'local-capability.json',
      path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).capability,
    },
    { name: 'owner.lock', path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).ownerLock },
    { name: 'checkout.lock', path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).checkoutLock },
    { name: 'service format.json', path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).format },
    { name: 'config.json', path: (place: TestPlace, root: string) => handPlaces(place.stateHome, root).config },
  ];
  /** Changes of this workspace's files that make the digest stale. */
  const staleMakers = [
    ...rewritten.map(({ name, path }) => ({
      name: `${name} rewritten with identical bytes`,
      make: (place: TestPlace, root: string) => {
        const file = path(place, root);
        replaceFile(place.base, file, readFileSync(file));
      },
    })),
    {
      name: "this root's row removed from roots.json",
      make: (place: TestPlace, root: string) =>
        rewriteJson(
          handPlaces(place.stateHome, root).roots,
          (table) => ({
            ...table,
            entries: (table.entries as { root: string }[]).filter((entry) => entry.root !== root),
          }),
          { scratch: place.base },
        ),
    },
  ];

  for (const { name, make } of staleMakers) {
    it(`is stale (conflict) once ${name}, and nothing changes`, async () => {
      const { place, root } = await deadOwnerPlace();
      const stale = viewOf(place, root).digest;
      make(place, root);
      const fresh = viewOf(place, root).digest;
      expect(fresh).not.toBe(stale);
      const before = stateListing(place.stateHome);
      const fences = serviceFences(place.stateHome, root);

      expect(codeOf(() => grantOf(place, root, stale))).toBe('conflict');
      expect(await codeOfAsync(recoverWith(place, root, stale))).toBe('conflict');
      expect(stateListing(place.stateHome)).toEqual(before);
      expect(journalRecords(place.stateHome)).toEqual([]);
      expect(serviceFences(place.stateHome, root)).toEqual(fences);

      // The new digest is the one to confirm.
      expect(await recoverWith(place, root, fresh)).toMatchObject({ recovered: true });
      expect(inspectWorkspace(coordinationOf(place, root)).status).toBe('stopped');
    });
  }

  for (const { name, make } of staleMakers) {
    it(`is checked again before every effect: ${name} between the grant and its release is conflict, before any effect`, async () => {
      const { place, root } = await deadOwnerPlace();
      const granted = grantOf(place, root, viewOf(place, root).digest);
      make(place, root);
      const before = stateListing(place.stateHome);
      const fences = serviceFences(place.stateHome, root);
      let crossings = 0;
      expect(
        await codeOfAsync(
          granted.release(() => {
            crossings += 1;
          }),
        ),
      ).toBe('conflict');
      expect(crossings).toBe(1);
      expect(stateListing(place.stateHome)).toEqual(before);
      expect(serviceFences(place.stateHome, root)).toEqual(fences);
      await finishRecovery(place, root);
    });
  }

  /** What does not make the digest stale: the rest of the table, the registry's format and the lock (docs/ownership.md, "Recovery: snapshot and digest"). */
  const notStaleMakers = [
    {
      name: 'roots.json rewritten with identical bytes',
      make: async (place: TestPlace) =>
        replaceFile(
          place.base,
          handPlaces(place.stateHome, '/').roots,
          readFileSync(handPlaces(place.stateHome, '/').roots),
        ),
    },
    {
      name: 'the registry format.json rewritten with identical bytes',
      make: async (place: TestPlace) =>
        replaceFile(
          place.base,
          handPlaces(place.stateHome, '/').registryFormat,
          readFileSync(handPlaces(place.stateHome, '/').registryFormat),
        ),
    },
    {
      name: "another workspace's row added (a live owner, this process) and another's added and removed",
      make: async (place: TestPlace) => {
        await acquireWorkspace(
          coordinationOf(place, makeWorkspace(place, 'other')),
          OWNER_CONFIG,
          loopbackEndpoint(45_020),
        );
        await (
          await acquireWorkspace(
            coordinationOf(place, makeWorkspace(place, 'third')),
            OWNER_CONFIG,
            loopbackEndpoint(45_021),
          )
        ).release();
      },
    },
  ];
  for (const { name, make } of notStaleMakers) {
    it(`is not stale when ${name}: the first digest recovers, also when it happens between the grant and its release`, async () => {
      for (const between of [false, true]) {
        const { place, root } = await deadOwnerPlace();
        const digest = viewOf(place, root).digest;
        const granted = between ? grantOf(place, root, digest) : undefined;
        const rows = () => rowsOf(place.stateHome).filter((row) => row.root !== root);
        await make(place);
        const others = rows();
        expect(viewOf(place, root).digest).toBe(digest);
        if (granted === undefined) expect(await recoverWith(place, root, digest)).toMatchObject({ recovered: true });
        else await granted.release(() => {});
        expect(serviceFences(place.stateHome, root)).toEqual([]);
        expect(inspectWorkspace(coordinationOf(place, root)).status).toBe('stopped');
        // The other rows are exactly as they were.
        expect(rows()).toEqual(others);
        await cleanUp();
      }
    });
  }

  it('a malformed digest is refused before authority is asked, and nothing changes', async () => {
    const { place, root } = await deadOwnerPlace();
    const digest = viewOf(place, root).digest;
    const before = stateListing(place.stateHome);
    let asked = 0;
    const counted = () => {
      asked += 1;
    };
    for (const malformed of [
      '',
      'not a digest',
      digest.slice(1),
      `${digest}0`,
      digest.toUpperCase(),
      `${digest.slice(0, 63)}g`,
    ]) {
      expect(
        codeOf(() => grantOf(place, root, malformed, counted)),
        malformed,
      ).toBe('refused');
      expect(
        await codeOfAsync(
          recover(root, { stateHome: place.stateHome, expectedDigest: malformed, assertAuthority: counted }),
        ),
        malformed,
      ).toBe('refused');
    }
    expect(asked).toBe(0);
    expect(stateListing(place.stateHome)).toEqual(before);
  });
});

// The guard (authority, then the durable bridge) is crossed before every effect:
// 1 registration stopped, 2 capability removed, 3 owner.lock removed, 4 before the registry transaction,
// 5 inside it before the row's removal, 6 before the checkout lock's removal. There is no seventh.
const REMAINING_AFTER: Record<number, string[]> = {
  1: IDLE_OWNER_FENCES,
  2: ['registry row', 'owner.lock', 'local-capability.json', "checkout.lock (a registration's)", 'folder mark'],
  3: ['registry row', 'owner.lock', "checkout.lock (a registration's)", 'folder mark'],
  4: ['registry row', "checkout.lock (a registration's)", 'folder mark'],
  5: ['registry row', "checkout.lock (a registration's)"],
  6: ['registry row', "checkout.lock (a registration's)"],
  7: ["checkout.lock (a registration's)"],
};

/** What each crossing comes before, for the tests' titles. */
const CROSSINGS: Record<number, string> = {
  1: 'before the registration is stopped',
  2: 'before the capability is removed',
  3: 'before owner.lock is removed',
  4: "before the folder's mark is removed",
  5: 'before the registry transaction',
  6: "inside the registry transaction, before the row's removal",
  7: "before the checkout lock's removal",
};

/** A granted recovery released with its durable bridge failing at crossing `failAt`: what it ended with, and how many crossings it made. */
async function releaseFailingAt(
  granted: RecoveryGrant,
  failAt: number,
): Promise<{ outcome: unknown; calls: number; down: BridgeDown }> {
  const down = new BridgeDown('the durable bridge is down');
  let calls = 0;
  const outcome = await errorOf(async () => {
    await granted.release(() => {
      calls += 1;
      if (calls === failAt) throw down;
    });
    throw new Error('completed');
  });
  return { outcome, calls, down };
}

describe('authority and the one-shot grant (docs/ownership.md, "Recovery: grant and release")', () => {
  it('authority denied: the operator tool error itself, and nothing changes', async () => {
    const { place, root } = await deadOwnerPlace();
    const digest = viewOf(place, root).digest;
    const before = stateListing(place.stateHome);
    const denial = new AuthorityDenied('not allowed to recover this workspace');
    const deny = () => {
      throw denial;
    };
    expect(await errorOf(() => grantOf(place, root, digest, deny))).toBe(denial);
    expect(
      await errorOf(() => recover(root, { stateHome: place.stateHome, expectedDigest: digest, assertAuthority: deny })),
    ).toBe(denial);
    expect(stateListing(place.stateHome)).toEqual(before);
    expect(serviceFences(place.stateHome, root)).toEqual(IDLE_OWNER_FENCES);
  });

  it('authority withdrawn part-way stops it before the next effect, with the remaining fences in place and no lock', async () => {
    const { place, root } = await deadOwnerPlace();
    const denial = new AuthorityDenied('authority withdrawn');
    let calls = 0;
    // Call 1 makes the grant; then one call per crossing: the fourth call is crossing 3.
    const withdrawn = () => {
      calls += 1;
      if (calls === 4) throw denial;
    };
    expect(
      await errorOf(() =>
        recover(root, {
          stateHome: place.stateHome,
          expectedDigest: viewOf(place, root).digest,
          assertAuthority: withdrawn,
        }),
      ),
    ).toBe(denial);
    expect(serviceFences(place.stateHome, root)).toEqual(REMAINING_AFTER[3]);
    expect(registryFolder(place)).toEqual(['format.json', 'roots.json']);
    await finishRecovery(place, root);
  });

  it('a grant is used once: a second release is consumed-grant, after a success or a failure', async () => {
    const { place, root } = await deadOwnerPlace();
    const digest = viewOf(place, root).digest;

    // A failure consumes it too.
    const failing = grantOf(place, root, digest);
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

    const granted = grantOf(place, root, viewOf(place, root).digest);
    let calls = 0;
    await granted.release(() => {
      calls += 1;
    });
    expect(calls).toBe(Object.keys(REMAINING_AFTER).length);
    expect(inspectWorkspace(coordinationOf(place, root)).status).toBe('stopped');
    const after = stateListing(place.stateHome);
    expect(await codeOfAsync(granted.release(() => {}))).toBe('consumed-grant');
    expect(stateListing(place.stateHome)).toEqual(after);
  });
});

describe('a durable bridge that fails stops recovery with the remaining fences in place (docs/ownership.md, "Why recovery\'s order is fenced")', () => {
  // One test per crossing (each a fresh dead owner and its own recovery), so that each stands alone and stays far
  // inside its bound.
  for (let failAt = 1; failAt <= 7; failAt += 1) {
    it(`at crossing ${failAt} (${CROSSINGS[failAt]}): stops there, the remaining fences stay, its registry lock is removed, and this process recovers at once`, async () => {
      const label = `fails at ${failAt}`;
      const { place, root } = await deadOwnerPlace();
      const granted = grantOf(place, root, viewOf(place, root).digest);
      const before = stateListing(place.stateHome);
      const { outcome, calls, down } = await releaseFailingAt(granted, failAt);
      expect(registryFolder(place), label).toEqual(['format.json', 'roots.json']);
      expect(outcome, label).toBe(down);
      expect(calls, label).toBe(failAt);
      expect(serviceFences(place.stateHome, root), label).toEqual(REMAINING_AFTER[failAt]);
      expect(pathExists(handPlaces(place.stateHome, root).checkoutLock), `${label}: the checkout lock goes last`).toBe(
        true,
      );
      expect(['absent', 'stopped'], label).not.toContain(inspectWorkspace(coordinationOf(place, root)).status);
      if (failAt === 1) expect(stateListing(place.stateHome), 'nothing written').toEqual(before);
      expect(
        await codeOfAsync(acquireWorkspace(coordinationOf(place, root), OWNER_CONFIG, loopbackEndpoint(45_030))),
        label,
      ).not.toBe('no error');
      await finishRecovery(place, root, label);
    });
  }

  it('at an eighth crossing: there is none, the recovery completes after seven, and its registry lock is removed', async () => {
    const { place, root } = await deadOwnerPlace();
    const { outcome, calls } = await releaseFailingAt(grantOf(place, root, viewOf(place, root).digest), 8);
    expect(registryFolder(place), 'fails at 8').toEqual(['format.json', 'roots.json']);
    expect(outcome).toMatchObject({ message: 'completed' });
    expect(calls).toBe(7);
    expect(serviceFences(place.stateHome, root)).toEqual([]);
    expect(inspectWorkspace(coordinationOf(place, root)).status).toBe('stopped');
  });

  for (const how of ['remove', 'rewrite'] as const) {
    it(`a journal record ${how === 'remove' ? 'removed' : 'rewritten with identical bytes'} between effects stops it: conflict, fences remain`, async () => {
      const { place, root } = await deadOwnerPlace();
      const places = handPlaces(place.stateHome, root);
      let tampered = false;
      // Inside the first effect, once its guard passed: right before the registration's rename (its last step; the
      // service folder's fsync is left to owner.lock's removal), so the next effect's guard is the first to see it.
      const hooks = {
        beforeMutation(step: { operation: string; action: string; path: string }) {
          if (tampered || step.operation !== 'replace' || step.action !== 'rename' || step.path !== places.registration)
            return;
          tampered = true;
          const [name, ...others] = journalRecords(place.stateHome);
          if (name === undefined || others.length > 0) throw new Error('expected one journal record');
          const record = join(places.journal, name);
          if (how === 'remove') rmSync(record);
          else {
            // The same bytes in a new file: a new incarnation, so a new stamp.
            const copy = join(place.base, 'record-copy');
            writeFileSync(copy, readFileSync(record), { mode: 0o600, flag: 'wx' });
            renameSync(copy, record);
          }
        },
      };
      expect(await codeOfAsync(recoverWith(place, root, viewOf(place, root).digest, { hooks }))).toBe('conflict');
      expect(tampered).toBe(true);
      expect(serviceFences(place.stateHome, root)).toEqual(REMAINING_AFTER[2]);
      expect(registryFolder(place)).toEqual(['format.json', 'roots.json']);
      expect(journalRecords(place.stateHome)).toHaveLength(how === 'remove' ? 0 : 1);
      await finishRecovery(place, root);
    });
  }
});
