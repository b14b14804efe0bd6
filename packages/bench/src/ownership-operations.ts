import { closeSync, openSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import { fileOwnership, type Ownership, type OwnershipLease } from '@leasehold/coordination';
import { fileSystemOf } from '@leasehold/private-files';
import { backendOf } from '@leasehold/registry';
import lockfile from 'proper-lockfile';
import { CONFIG, boundEndpoint, fillRegistry, type BenchPlace } from './fixtures.js';
import { elapsed, now, timed, timedAsync, type Operation } from './harness.js';

// Sections 3, 4 and 5: the ownership cycle, the hot paths and the
// scale of the registry, with proper-lockfile as the peer.

/** The registry sizes of section 5: the measured workspace is the 1st, 64th and 256th reservation. */
const SCALES = [1, 64, 256] as const;

/** Operations plus what they hold until the end of the run. */
export interface OwnershipSuite {
  readonly operations: Operation[];
  /** Releases the held leases and locks. */
  close: () => Promise<void>;
}

/** What a cycle acquires: a lease it then releases. */
interface Releasable {
  release(): Promise<void>;
}

/**
 * One acquire + release, recording its two halves as `<id>:acquire` and
 * `<id>:release`; `prepare` runs off the clock. The etcd section measures
 * its cycles with it too, so that both backends are timed alike.
 */
export function cycle<State>(
  id: string,
  label: string,
  prepare: () => State,
  acquire: (state: State) => Promise<Releasable>,
): Operation {
  return timedAsync(id, label, {
    prepare,
    run: async (state, record) => {
      const start = now();
      const lease = await acquire(state);
      const acquired = now();
      await lease.release();
      record(`${id}:acquire`, elapsed(start, acquired));
      record(`${id}:release`, elapsed(acquired));
    },
  });
}

/** A cycle of `root` as a daemon runs one, through the seam: `root` and `endpoint` are called off the clock. */
export function seamCycle(
  id: string,
  label: string,
  ownership: Ownership,
  root: () => string,
  endpoint: () => string,
): Operation {
  return cycle(
    id,
    label,
    () => ({ root: root(), endpoint: endpoint() }),
    (state) => ownership.acquire(state.root, CONFIG, { boundEndpoint: state.endpoint }),
  );
}

/** An inspect() of a held workspace: phase idle, so the answer is `unavailable` after every check ran. */
function inspect(id: string, label: string, ownership: Ownership, root: string): Operation {
  return timedAsync(id, label, {
    run: async () => {
      const inspection = await ownership.inspect(root);
      if (inspection.status !== 'unavailable' || !inspection.reason.startsWith('idle')) {
        throw new Error(`${id}: unexpected inspection ${inspection.status}`);
      }
    },
  });
}

/**
 * The file-system check every operation makes of its state home (registry's `reachStateHome`), alone,
 * against its floor, the bare `statfs`; and the open of the same state home with it: `backendOf`, all
 * `openStateHome` reads before a `leasehold` command's operation. On a proven file system the check is
 * one `fileSystemOf`: the allowance is read only on one that is not, and none of the bench's is.
 */
function fileSystemCheck(stateHome: string): Operation[] {
  return [
    timed('fs.statfs', 'statfsSync of the state home', { run: () => statfsSync(stateHome) }),
    timed('file-system-check', 'the file-system check alone: fileSystemOf(state home)', {
      run: () => fileSystemOf(stateHome),
    }),
    timed('state-home.open', 'backendOf(state home): the open of every leasehold command', {
      run: () => backendOf(stateHome),
    }),
  ];
}

/**
 * Sets up every state home (the registry filled to each scale, a held lease
 * for the hot paths, each reused workspace acquired once before) and returns
 * the operations.
 */
export async function ownershipOperations(place: BenchPlace): Promise<OwnershipSuite> {
  const others = place.folder('others');
  const held: OwnershipLease[] = [];
  const operations: Operation[] = [];

  const freshHome = join(place.root, 'state-fresh');
  // A first cycle makes the registry and the workspaces folder, so "fresh" means a new workspace only.
  const fresh = fileOwnership({ stateHome: freshHome });
  await (await fresh.acquire(place.workspace(), CONFIG, { boundEndpoint: boundEndpoint() })).release();
  operations.push(
    seamCycle('cycle.fresh', 'acquire + release, fresh workspace', fresh, () => place.workspace(), boundEndpoint),
  );

  const inspected = new Map<number, { ownership: Ownership; root: string; stateHome: string }>();
  for (const scale of SCALES) {
    const cycleHome = join(place.root, `state-cycle-${scale}`);
    await fillRegistry(cycleHome, join(others, `cycle-${scale}`), scale - 1);
    const cycled = fileOwnership({ stateHome: cycleHome });
    const reused = place.workspace();
    const endpoint = boundEndpoint();
    await (await cycled.acquire(reused, CONFIG, { boundEndpoint: endpoint })).release();
    const where = scale === 1 ? 'reused workspace' : `reused workspace, ${scale - 1} other reservations`;
    operations.push(
      seamCycle(
        `cycle.${scale}`,
        `acquire + release, ${where}`,
        cycled,
        () => reused,
        () => endpoint,
      ),
    );

    const inspectHome = join(place.root, `state-inspect-${scale}`);
    await fillRegistry(inspectHome, join(others, `inspect-${scale}`), scale - 1);
    const owner = {
      ownership: fileOwnership({ stateHome: inspectHome }),
      root: place.workspace(),
      stateHome: inspectHome,
    };
    held.push(await owner.ownership.acquire(owner.root, CONFIG, { boundEndpoint: boundEndpoint() }));
    inspected.set(scale, owner);
    const what = scale === 1 ? 'inspect() of a held workspace' : `inspect(), ${scale - 1} other reservations`;
    operations.push(inspect(`inspect.${scale}`, what, owner.ownership, owner.root));
  }

  const hot = inspected.get(1)!;
  operations.push(
    timedAsync('local-access', 'localAccess() of a held workspace', {
      run: async () => {
        if ((await hot.ownership.localAccess(hot.root)).capability.length === 0)
          throw new Error('localAccess: no capability');
      },
    }),
  );

  // The check inspect.1 makes, of the same state home, so that inspect.1 less it is that inspect() before the check.
  operations.push(...fileSystemCheck(hot.stateHome));

  // proper-lockfile: one file cycled, one held for checkSync. Both files exist, as its default realpath needs.
  const locks = place.folder('proper-lockfile');
  const cycled = join(locks, 'cycled');
  const checked = join(locks, 'checked');
  for (const file of [cycled, checked]) closeSync(openSync(file, 'wx', 0o600));
  // The held lock must not turn stale while the synchronous rounds keep proper-lockfile's
  // mtime refresh from running: an hour, for the lock and for every check of it.
  const heldLock = { stale: 3_600_000 };
  lockfile.lockSync(checked, heldLock);
  operations.push(
    timed('proper-lockfile.cycle', 'proper-lockfile lockSync + unlockSync', {
      run: () => {
        lockfile.lockSync(cycled);
        lockfile.unlockSync(cycled);
      },
    }),
    timed('proper-lockfile.check', 'proper-lockfile checkSync of a held lock', {
      run: () => {
        if (!lockfile.checkSync(checked, heldLock)) throw new Error('proper-lockfile: the held lock reads free');
      },
    }),
  );

  return {
    operations,
    async close() {
      lockfile.unlockSync(checked);
      for (const lease of held.splice(0)) await lease.release();
    },
  };
}
