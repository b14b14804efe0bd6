import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  codeOf,
  killAndReap,
  loopbackEndpoint,
  makePlace,
  makeWorkspace,
  messageOf,
  messagesOf,
  pathExists,
  serveInTurn,
  spawnPlanned,
  type SpawnedChild,
  type TestPlace,
} from '@leasehold/test-utils';
import { WAITERS_FOLDER, type WaitState } from '@leasehold/contracts';
import { OWNER_CONFIG, PROCESS_FIXTURES, steppedOwner } from '../test/process-helpers.js';
import { fileOwnership } from './index.js';

afterEach(cleanUp);

const WAITERS = 8;
/** Each waiter's bound: far above what the test needs, so that only a wrong order or a lost turn fails it. */
const WAIT_MS = 60_000;

/** A waiter in another process (test/process-fixtures/waiter.mjs). */
function waiter(place: TestPlace, root: string, port: number): SpawnedChild {
  return spawnPlanned(PROCESS_FIXTURES, 'waiter.mjs', {
    workspace: root,
    stateHome: place.stateHome,
    config: OWNER_CONFIG,
    endpoint: loopbackEndpoint(port),
    waitMs: WAIT_MS,
  });
}

/** What each waiter printed, to say why a wait went wrong. */
function said(waiters: readonly SpawnedChild[]): string {
  return waiters.map((child) => child.lines.join(' | ')).join(' || ');
}

/** The tickets left in the state home's line folder. */
function tickets(place: TestPlace): string[] {
  const folder = join(place.stateHome, WAITERS_FOLDER);
  return pathExists(folder) ? readdirSync(folder).filter((name) => name.endsWith('.json')) : [];
}

describe('acquire({ waitMs }): waiting for a live owner, first come, first served', () => {
  it(`serves ${WAITERS} waiters in the order they came, one at a time; a waiter killed in the middle neither blocks nor reorders the rest`, async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'shared');
    const holder = steppedOwner(place, root, 45_000);
    await messageOf(holder, 'acquired');
    // Each joins the line once the one before it is waiting: their order of arrival is known.
    const waiters: SpawnedChild[] = [];
    for (let index = 0; index < WAITERS; index += 1) {
      const next = waiter(place, root, 45_001 + index);
      const { waiting } = (await messageOf(next, 'waiting')) as { waiting: { ahead: number; holder: unknown } };
      expect(waiting.ahead, `waiter ${index}: ${said(waiters)}`).toBe(index);
      waiters.push(next);
    }
    expect(tickets(place)).toHaveLength(WAITERS);
    const ownership = fileOwnership({ stateHome: place.stateHome });
    expect(await ownership.waiters(root)).toBe(WAITERS);
    // The fourth dies in line: its ticket is taken over by the waiter behind it, proved gone.
    const killed = waiters.splice(3, 1)[0]!;
    await killAndReap(killed);
    // Counted no longer, whether or not a waiter has removed its ticket yet.
    expect(await ownership.waiters(root)).toBe(WAITERS - 1);

    holder.send('release');
    await messageOf(holder, 'released');
    // One at a time, in the order they came.
    await serveInTurn(waiters);
    expect(messagesOf(killed, 'acquired')).toEqual([]);
    // Every ticket is gone: the served ones by their waiters, the killed one's by a waiter behind it.
    expect(tickets(place)).toEqual([]);
    expect(await ownership.inspect(root)).toMatchObject({ status: 'stopped' });
    expect(await ownership.waiters(root)).toBe(0);
  });

  it("a cancelled waiter rejects with its signal's reason and leaves no ticket", async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'cancelled');
    const holder = steppedOwner(place, root, 45_100);
    await messageOf(holder, 'acquired');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    const cancel = new AbortController();
    const told: WaitState[] = [];
    const waiting = ownership.acquire(root, OWNER_CONFIG, {
      boundEndpoint: loopbackEndpoint(45_101),
      waitMs: WAIT_MS,
      signal: cancel.signal,
      onWait: (state) => {
        told.push(state);
        cancel.abort(new Error('cancelled by the test'));
      },
    });
    await expect(waiting).rejects.toThrow('cancelled by the test');
    // It named the holder, with its command line (a process of this host).
    expect(told[0]).toMatchObject({ ahead: 0, holder: { pid: holder.pid } });
    expect(told[0]!.holder!.commandLine!.join(' ')).toContain('stepped-owner.mjs');
    expect(tickets(place)).toEqual([]);
    holder.send('release');
    await messageOf(holder, 'released');
  });

  it('a wait that runs out is conflict naming the owner and the hand-over, and leaves no ticket', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'timed-out');
    const holder = steppedOwner(place, root, 45_200);
    await messageOf(holder, 'acquired');
    const ownership = fileOwnership({ stateHome: place.stateHome });
    const error = await ownership
      .acquire(root, OWNER_CONFIG, { boundEndpoint: loopbackEndpoint(45_201), waitMs: 300 })
      .catch((caught: unknown) => caught);
    expect(
      codeOf(() => {
        throw error;
      }),
    ).toBe('conflict');
    expect((error as Error).message).toContain(`still held by pid ${holder.pid}`);
    expect((error as { remedy?: string }).remedy).toContain('leasehold stop --ask');
    expect(tickets(place)).toEqual([]);
    holder.send('release');
    await messageOf(holder, 'released');
  });

  it('never waits for a quarantine: a crashed owner is answered at once, and no ticket is left', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'crashed');
    const holder = steppedOwner(place, root, 45_300);
    await messageOf(holder, 'acquired');
    await killAndReap(holder);
    const ownership = fileOwnership({ stateHome: place.stateHome });
    const told: WaitState[] = [];
    const error = await ownership
      .acquire(root, OWNER_CONFIG, {
        boundEndpoint: loopbackEndpoint(45_301),
        waitMs: WAIT_MS,
        onWait: (state) => told.push(state),
      })
      .catch((caught: unknown) => caught);
    expect((error as { code?: string }).code).toBe('quarantine');
    expect(told).toEqual([]);
    expect(tickets(place)).toEqual([]);
  });
});
