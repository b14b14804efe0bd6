import { lstatSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { acquireWorkspace, inspectWorkspace } from '@leasehold/coordination';
import {
  cleanUp,
  handPlaces,
  isMessage,
  jsonOf,
  loopbackEndpoint,
  makePlace,
  makeWorkspace,
  messageOf,
  namesIn,
  serviceFences,
  spawnPlanned,
  spawnSharedFixture,
  type SpawnedChild,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  FIXTURES,
  FIXTURE_MODULES,
  OWNER_CONFIG,
  coordinationOf,
  deadOwner,
  finishRecovery,
  journalRecords,
  ownerPlan,
  recoverWith,
  rowsOf,
  viewOf,
} from '../test/helpers.js';
import { recover } from './recover.js';

afterEach(cleanUp);

// A workspace's recovery digest covers only this root's row (docs/ownership.md, "Recovery: snapshot and digest", "Many owners in one state home")
// and its own files, so other workspaces of the same state home acquiring,
// releasing, or crashing inside their own registry transactions never make
// it stale, and never block its recovery beyond the lock wait.

/** A churner child: acquires and releases `count` workspaces of its own, round after round, until told to stop. */
function churner(place: TestPlace, name: string, firstPort: number, count: number): SpawnedChild {
  const workspaces = Array.from({ length: count }, (_, index) => ({
    root: makeWorkspace(place, `${name}-${index}`),
    endpoint: loopbackEndpoint(firstPort + index),
  }));
  return spawnPlanned(FIXTURES, 'churner.mjs', { stateHome: place.stateHome, workspaces, config: OWNER_CONFIG });
}

/** Waits until a churner has reported a round after `round`. */
async function roundAfter(child: SpawnedChild, round: number): Promise<number> {
  const line = await child
    .line((candidate) => isMessage('round')(candidate) && (JSON.parse(candidate) as { round: number }).round > round)
    .catch((error: unknown) => {
      throw new Error(`the churner ended: ${child.lines.filter(isMessage('error')).join('; ')}`, { cause: error });
    });
  return (JSON.parse(line) as { round: number }).round;
}

/** The last round a churner reported (0 before its first). */
function lastRound(child: SpawnedChild): number {
  const rounds = child.lines.filter(isMessage('round')).map((line) => (JSON.parse(line) as { round: number }).round);
  return rounds.at(-1) ?? 0;
}

/** Stops a churner and proves it never failed: every one of its acquires and releases went through. */
async function stopped(child: SpawnedChild): Promise<number> {
  child.send('stop');
  const end = await child.closed;
  expect(end, end.stderr).toMatchObject({ code: 0, signal: null });
  expect(child.lines.filter(isMessage('error'))).toEqual([]);
  return (await messageOf(child, 'stopped')).stopped as number;
}

describe('other workspaces\' churn never invalidates a recovery (docs/ownership.md, "Many owners in one state home")', () => {
  it('owners of other roots acquiring and releasing between the snapshot and recover, and during it: the first digest recovers', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'dead');
    await deadOwner(place, root);
    const places = handPlaces(place.stateHome, root);
    const snapshot = viewOf(place, root);
    const tableBefore = lstatSync(places.roots).ino;

    const churners = [churner(place, 'first', 45_100, 2), churner(place, 'second', 45_200, 2)];
    // A live owner of another root, added after the snapshot (held by this process).
    const heldRoot = makeWorkspace(place, 'held');
    const held = await acquireWorkspace(coordinationOf(place, heldRoot), OWNER_CONFIG, loopbackEndpoint(45_300));
    // Each churner completed two rounds after the snapshot: the table was rewritten many times.
    for (const child of churners) await roundAfter(child, 1);
    expect(lstatSync(places.roots).ino).not.toBe(tableBefore);
    expect(viewOf(place, root).digest).toBe(snapshot.digest);

    // Recovery with the first digest, while they go on (the lock wait bounds the short holds of their transactions).
    const during = churners.map(lastRound);
    const outcome = await recover(root, {
      stateHome: place.stateHome,
      expectedDigest: snapshot.digest,
      assertAuthority: () => {},
      lockWaitMs: 30_000,
    });
    expect(outcome).toMatchObject({ recovered: true });
    expect(serviceFences(place.stateHome, root)).toEqual([]);
    const coordination = coordinationOf(place, root);
    // Its `inspect` is never made unavailable by their transactions (docs/ownership.md, "Many owners in one state home").
    for (const [index, child] of churners.entries()) {
      let settled = false;
      const next = roundAfter(child, lastRound(child)).finally(() => {
        settled = true;
      });
      let reads = 0;
      while (!settled || reads === 0) {
        expect(inspectWorkspace(coordination).status).toBe('stopped');
        reads += 1;
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(await next).toBeGreaterThan(during[index]!);
    }
    for (const child of churners) expect(await stopped(child)).toBeGreaterThanOrEqual(2);

    held.assert();
    expect(rowsOf(place.stateHome).map((row) => row.root)).toEqual([heldRoot]);
    expect(journalRecords(place.stateHome)).toHaveLength(1);
    await (await acquireWorkspace(coordination, OWNER_CONFIG, loopbackEndpoint(45_301))).release();
    await held.release();
  });

  it("a crash inside another workspace's transaction: recovery takes its lock over, and that workspace stays fenced until it is recovered too", async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'dead');
    await deadOwner(place, root);
    const snapshot = viewOf(place, root);

    // Another root's owner killed in its acquire's transaction, after its row, before its service folder was renamed into place.
    const other = makeWorkspace(place, 'other');
    const otherPlaces = handPlaces(place.stateHome, other);
    const crashed = spawnSharedFixture(
      'crasher',
      {
        ...ownerPlan(place, other, 'acquire'),
        endpoint: loopbackEndpoint(45_400),
        killBefore: { operation: 'create-folder', action: 'rename', path: otherPlaces.service },
      },
      FIXTURE_MODULES,
    );
    expect(await crashed.closed).toMatchObject({ code: null, signal: 'SIGKILL' });
    expect(jsonOf(otherPlaces.registryLock)).toMatchObject({ pid: crashed.pid, root: other });
    const otherRow = rowsOf(place.stateHome).find((row) => row.root === other);
    expect(otherRow).toMatchObject({ pid: crashed.pid });
    expect(viewOf(place, root).digest).toBe(snapshot.digest);

    expect(await recoverWith(place, root, snapshot.digest)).toMatchObject({ recovered: true });
    expect(serviceFences(place.stateHome, root)).toEqual([]);
    // The dead writer's lock was taken over and is gone; its row is exactly as it was.
    expect(namesIn(dirname(otherPlaces.registryLock))).toEqual(['format.json', 'roots.json']);
    expect(rowsOf(place.stateHome)).toEqual([otherRow]);
    expect(inspectWorkspace(coordinationOf(place, other)).status).toBe('unavailable');
    expect(serviceFences(place.stateHome, other)).toEqual(['registry row']);

    await finishRecovery(place, other);
    await (await acquireWorkspace(coordinationOf(place, root), OWNER_CONFIG, loopbackEndpoint(45_401))).release();
  });
});
