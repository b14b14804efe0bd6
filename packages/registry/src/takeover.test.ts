import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { encode, type Reservation } from '@leasehold/contracts';
import type { MutationStep } from '@leasehold/private-files';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  createSteps,
  killAndReap,
  lockRemoveSteps,
  messageOf,
  messagesOf,
  namesIn,
  pathExists,
  removeSteps,
  replaceSteps,
  shownStep,
  type SpawnedChild,
} from '@leasehold/test-utils';
import {
  TEST_ROOT,
  initialised,
  linksOf,
  lockAt,
  lockDocument,
  markersIn,
  myProcessStart,
  reservation,
  reservations,
  reserveAll,
  shownPath,
  shownSteps,
  spawnHolder,
  spawnTransactor,
  withChangedField,
  writePrivateFile,
} from '../test/helpers.js';
import { Registry } from './index.js';

afterEach(cleanUp);

const LOCK = 'state/v1/registry/registry.lock';
const ROOTS = 'state/v1/registry/roots.json';
const DEAD_MARKER = 'state/v1/registry/takeover-<dead>.lock';

// The mutating steps of a transaction that takes over a dead holder's lock and
// reserves one row (docs/ownership.md, "Taking over a dead registry lock";
// docs/persistence.md, "Publishing a file"): the marker named after the dead token is
// created exclusively, the lock replaced by ours, the marker removed, the
// table swapped, and our lock removed.
const TAKEOVER_STEPS = [
  ...createSteps(DEAD_MARKER),
  ...replaceSteps(LOCK),
  ...removeSteps(DEAD_MARKER),
  ...replaceSteps(ROOTS),
  ...lockRemoveSteps(LOCK),
];

/** The 1-based position of the `occurrence`-th step equal to `step` in TAKEOVER_STEPS. */
function positionOf(step: string, occurrence = 1): number {
  let seen = 0;
  const index = TAKEOVER_STEPS.findIndex((candidate) => candidate === step && ++seen === occurrence);
  if (index < 0) throw new Error(`no step ${step}`);
  return index + 1;
}

const TEMP_WRITE = 'replace write state/v1/.staging/<temp>';
const MARKER_LINKED = positionOf(`create link ${DEAD_MARKER}`);
const MARKER_TEMP_UNLINKED = positionOf('create unlink state/v1/.staging/<temp>');
const LOCK_RENAMED = positionOf(`replace rename ${LOCK}`);
const MARKER_REMOVED = positionOf(`remove unlink ${DEAD_MARKER}`);
const ROOTS_RENAMED = positionOf(`replace rename ${ROOTS}`);
const LOCK_REMOVED = positionOf(`remove unlink ${LOCK}`);
// Each window in which a staged temp exists: from its write up to its unlink or rename.
const TEMP_WINDOWS: [number, number][] = [
  [positionOf('create write state/v1/.staging/<temp>'), MARKER_TEMP_UNLINKED],
  [positionOf(TEMP_WRITE, 1), LOCK_RENAMED],
  [positionOf(TEMP_WRITE, 2), ROOTS_RENAMED],
];

/** What a taker killed before step `killAt` (steps 1 to killAt - 1 done) leaves, computed from the step list alone. */
function leftBehind(killAt: number) {
  const done = (position: number) => position < killAt;
  const marker = done(MARKER_LINKED) && !done(MARKER_REMOVED);
  return {
    lock: done(LOCK_REMOVED) ? 'none' : done(LOCK_RENAMED) ? 'taker' : 'dead holder',
    markers: marker ? ['takeover-<dead>.lock'] : [],
    markerLinks: marker ? (done(MARKER_TEMP_UNLINKED) ? 1 : 2) : 0,
    staging: TEMP_WINDOWS.filter(([written, gone]) => done(written) && !done(gone)).length,
    takerRow: done(ROOTS_RENAMED),
  };
}

/** A lock left by a holder SIGKILLed while it held it; answers the dead holder's pid and token. */
async function deadLock(stateHome: string): Promise<{ pid: number; token: string }> {
  const holder = await spawnHolder(stateHome, '/srv/dead-holder');
  const token = lockAt(new Registry(stateHome).layout.registryLock)!.token;
  expect((await killAndReap(holder)).signal).toBe('SIGKILL');
  return { pid: holder.pid, token };
}

/**
 * Races `rows.length` child processes, each running one transaction that
 * reserves its own row inside an O_EXCL critical section, released together
 * once all are ready. Asserts that each succeeded, saw the lock as its own,
 * and never found the critical section taken.
 */
async function race(stateHome: string, rows: readonly Reservation[]): Promise<void> {
  const critical = join(dirname(stateHome), 'critical-section');
  const racers = rows.map((row) =>
    spawnTransactor({ stateHome, root: row.root, reserve: row, critical, waitForGo: true, lockWaitMs: 60_000 }),
  );
  await Promise.all(racers.map((racer) => messageOf(racer, 'ready')));
  for (const racer of racers) racer.send('go');
  const ends = await Promise.all(racers.map((racer) => racer.closed));
  const report = (racer: SpawnedChild, index: number) => ({
    code: ends[index]!.code,
    done: messagesOf(racer, 'done').length,
    errors: messagesOf(racer, 'error'),
    overlaps: messagesOf(racer, 'overlap').length,
    notMine: messagesOf(racer, 'notMine'),
  });
  expect(racers.map(report)).toEqual(racers.map(() => ({ code: 0, done: 1, errors: [], overlaps: 0, notMine: [] })));
  expect(pathExists(critical)).toBe(false);
}

const byRoot = (rows: readonly Reservation[]) =>
  [...rows].sort((a, b) => (a.root < b.root ? -1 : a.root > b.root ? 1 : 0));

describe('the take-over of a dead lock', () => {
  it('the dry run: a taker shows exactly marker, lock, marker removal, table and lock removal', async () => {
    const { stateHome, registry } = await initialised();
    const dead = await deadLock(stateHome);
    const row = reservation(stateHome, 100);
    const taker = spawnTransactor({ stateHome, root: row.root, reserve: row });
    expect((await taker.closed).code).toBe(0);
    expect(messagesOf(taker, 'notMine')).toEqual([]);
    expect(shownSteps(taker, stateHome, { [dead.token]: '<dead>' })).toEqual(TAKEOVER_STEPS);
    expect(registry.list().entries).toEqual([row]);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    expect(namesIn(registry.layout.staging)).toEqual([]);
  });

  it.each(TAKEOVER_STEPS.map((step, index) => [index + 1, step] as const))(
    'is exclusive: a taker killed before step %i (%s), then 8 writers racing over what it left, all win and no update is lost',
    async (killAt) => {
      const { stateHome, registry } = await initialised();
      const existing = reservation(stateHome, 50);
      await reserveAll(registry, [existing]);
      const dead = await deadLock(stateHome);
      const takerRow = reservation(stateHome, 100);
      const taker = spawnTransactor({ stateHome, root: takerRow.root, reserve: takerRow, killAt });
      expect((await taker.closed).signal).toBe('SIGKILL');
      expect(shownSteps(taker, stateHome, { [dead.token]: '<dead>' })).toEqual(TAKEOVER_STEPS.slice(0, killAt));

      // What the killed taker left is what its step list says: a partial take-over.
      const expected = leftBehind(killAt);
      const lock = lockAt(registry.layout.registryLock);
      const markerNames = markersIn(stateHome);
      expect({
        lock:
          lock === undefined
            ? 'none'
            : lock.pid === dead.pid
              ? 'dead holder'
              : lock.pid === taker.pid
                ? 'taker'
                : lock.pid,
        markers: markerNames.map((name) => shownPath(name, { [dead.token]: '<dead>' })),
        markerLinks: markerNames.length === 1 ? linksOf(join(registry.layout.registry, markerNames[0]!)) : 0,
        staging: namesIn(registry.layout.staging).length,
        takerRow: registry.list().entries.some((entry) => entry.root === takerRow.root),
      }).toEqual(expected);
      for (const name of markerNames) expect(lockAt(join(registry.layout.registry, name))?.pid).toBe(taker.pid);

      const rows = reservations(stateHome, 8);
      await race(stateHome, rows);
      // Every racer's row is there: a lost update (two holders swapping the table from one read) would drop one.
      const kept = expected.takerRow ? [existing, takerRow] : [existing];
      expect(byRoot(registry.list().entries)).toEqual(byRoot([...kept, ...rows]));
      expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
      expect(namesIn(registry.layout.staging)).toEqual([]);
    },
  );

  it('many writers racing over one fresh dead lock all win, one at a time', async () => {
    const { stateHome, registry } = await initialised();
    await deadLock(stateHome);
    const rows = reservations(stateHome, 12);
    await race(stateHome, rows);
    expect(byRoot(registry.list().entries)).toEqual(byRoot(rows));
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    expect(namesIn(registry.layout.staging)).toEqual([]);
  });
});

describe('a take-over marker whose own holder died', () => {
  function recording(stateHome: string, steps: MutationStep[]): Registry {
    return new Registry(stateHome, {
      lockWaitMs: 0,
      hooks: {
        beforeMutation(step) {
          steps.push({ operation: step.operation, action: step.action, path: step.path });
        },
      },
    });
  }

  it('is taken over by a marker named after its token, then the lock; both markers are removed', async () => {
    const { stateHome, registry } = await initialised();
    const rows = reservations(stateHome, 2);
    await reserveAll(registry, rows);
    const dead = await deadLock(stateHome);
    // The taker dies right before it renames its lock over the dead one: its marker stays, naming it.
    const taker = spawnTransactor({ stateHome, root: '/srv/taker', killAt: LOCK_RENAMED });
    expect((await taker.closed).signal).toBe('SIGKILL');
    const [markerName] = markersIn(stateHome) as [string];
    const marker = lockAt(join(registry.layout.registry, markerName))!;
    expect(markerName).toBe(`takeover-${dead.token}.lock`);
    expect(marker).toMatchObject({ pid: taker.pid, root: '/srv/taker' });
    expect(registry.readMarkers().map((found) => found.verdict)).toEqual(['absent']);
    expect(lockAt(registry.layout.registryLock)?.pid).toBe(dead.pid);

    const steps: MutationStep[] = [];
    const next = reservation(stateHome, 9);
    await recording(stateHome, steps).transaction(next.root, (transaction) => {
      expect(markersIn(stateHome)).toEqual([]);
      expect(registry.readLock()?.lock).toMatchObject({ pid: process.pid, root: next.root });
      transaction.reserve(next);
    });
    const tokens = { [dead.token]: '<dead>', [marker.token]: '<taker>' };
    const place = { base: dirname(stateHome), stateHome };
    const shown = steps.map((step) => shownPath(shownStep({ step }, place, TEST_ROOT), tokens));
    const markers = [`takeover-${dead.token}.lock`, `takeover-${marker.token}.lock`].sort();
    expect(shown).toEqual([
      // The dead taker's staged temp (it died between its write and its rename).
      'sweep-staging unlink state/v1/.staging/<temp>',
      'sweep-staging fsync-directory state/v1/.staging',
      ...createSteps('state/v1/registry/takeover-<taker>.lock'),
      ...replaceSteps(DEAD_MARKER),
      ...replaceSteps(LOCK),
      ...markers.flatMap((name) => removeSteps(`state/v1/registry/${shownPath(name, tokens)}`)),
      ...replaceSteps(ROOTS),
      ...lockRemoveSteps(LOCK),
    ]);
    expect(registry.list().entries).toEqual([...rows, next]);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    expect(namesIn(registry.layout.staging)).toEqual([]);
  });

  it('a chain of dead markers is taken over link by link, back to the lock', async () => {
    const { stateHome, registry } = await initialised();
    // Written by hand: a dead lock, a dead taker's marker for it, and a second dead taker's marker for that one.
    const absent = () => ({ processStart: withChangedField(myProcessStart(), 3) });
    const lock = lockDocument(absent());
    const first = lockDocument(absent());
    const second = lockDocument(absent());
    writePrivateFile(registry.layout.registryLock, encode(lock));
    writePrivateFile(join(registry.layout.registry, `takeover-${lock.token}.lock`), encode(first));
    writePrivateFile(join(registry.layout.registry, `takeover-${first.token}.lock`), encode(second));
    const steps: MutationStep[] = [];
    await recording(stateHome, steps).transaction('/srv/next', () => undefined);
    const tokens = { [lock.token]: '<lock>', [first.token]: '<first>', [second.token]: '<second>' };
    const place = { base: dirname(stateHome), stateHome };
    const shown = steps.map((step) => shownPath(shownStep({ step }, place, TEST_ROOT), tokens));
    expect(shown.slice(0, 5 + 4 * 3)).toEqual([
      ...createSteps('state/v1/registry/takeover-<second>.lock'),
      ...replaceSteps('state/v1/registry/takeover-<first>.lock'),
      ...replaceSteps('state/v1/registry/takeover-<lock>.lock'),
      ...replaceSteps(LOCK),
    ]);
    // Then the three markers are removed, and at last our lock.
    expect(shown.slice(5 + 4 * 3, -1).sort()).toEqual(
      ['<lock>', '<first>', '<second>']
        .flatMap((name) => removeSteps(`state/v1/registry/takeover-${name}.lock`))
        .sort(),
    );
    expect(shown.slice(-1)).toEqual(lockRemoveSteps(LOCK));
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
  });

  it('a holder is not failed by a slow writer still publishing a stale marker: it leaves it, and that writer sweeps it later', async () => {
    const { stateHome, registry } = await initialised();
    await deadLock(stateHome);
    // The slow writer judged the dead lock and stops before it stages its marker, then again right after linking it.
    const slow = spawnTransactor({
      stateHome,
      root: '/srv/slow',
      lockWaitMs: 60_000,
      pauseAt: ['^create write .*/\\.staging/', '^create unlink .*/\\.staging/'],
    });
    expect(await messageOf(slow, 'paused')).toMatchObject({ paused: { operation: 'create', action: 'write' } });
    // Meanwhile another writer takes the lock over, and finishes.
    await registry.transaction('/srv/first', () => undefined);
    expect(pathExists(registry.layout.registryLock)).toBe(false);
    slow.send('go');
    await slow.line((line) => line.includes('"paused"') && line.includes('"action":"unlink"'));
    // The slow writer's marker is published, still with its staged second link.
    const [stale] = markersIn(stateHome) as [string];
    expect(linksOf(join(registry.layout.registry, stale))).toBe(2);
    const row = reservation(stateHome, 1);
    await registry.transaction(row.root, (transaction) => transaction.reserve(row));
    expect(markersIn(stateHome)).toEqual([stale]);
    slow.send('go');
    const end = await slow.closed;
    expect(end.code).toBe(0);
    expect(messagesOf(slow, 'done')).toHaveLength(1);
    expect(registry.list().entries).toEqual([row]);
    expect(namesIn(registry.layout.registry)).toEqual(['format.json', 'roots.json']);
    expect(namesIn(registry.layout.staging)).toEqual([]);
  });

  it("a marker named after a token that is not the lock's is stale: the next holder removes it", async () => {
    const { registry } = await initialised();
    const path = join(registry.layout.registry, `takeover-${randomUUID()}.lock`);
    writePrivateFile(path, encode(lockDocument({})));
    await registry.transaction(TEST_ROOT, () => undefined);
    expect(pathExists(path)).toBe(false);
  });
});
