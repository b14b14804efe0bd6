import { ContractError, waitTicketPlaces, type WaitState } from '@leasehold/contracts';
import { namesIn } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  capabilityOf,
  endTest,
  filesOf,
  placeWithWorkspace,
  POLICY,
  servingOf,
  spawnOwner,
  witness,
  type Place,
} from '../test/helpers.js';
import { connect, serveOwner, type ServeOutcome, type Serving } from './index.js';

/** A serveOwner of this process that waits behind the workspace's owner. */
interface Waiter {
  /** Every WaitState its onWait was told, in order. */
  readonly waits: WaitState[];
  /** Resolves with the first WaitState (the wait has begun: its ticket is in line). */
  readonly waiting: Promise<WaitState>;
  /** Resolves from onServing. */
  readonly serving: Promise<Serving>;
  /** Settles when serveOwner does: its outcome, or the error it rejected with. */
  readonly ended: Promise<{ outcome?: ServeOutcome; error?: unknown }>;
  abort(): void;
}

const waiters: Waiter[] = [];

// Every waiter of the test is aborted and settled before the shared clean-up kills the children and scans what was seen.
afterEach(async () => {
  for (const waiter of waiters.splice(0)) {
    waiter.abort();
    await waiter.ended;
  }
  await endTest();
});

function waitBehind(place: Place): Waiter {
  const abort = new AbortController();
  const waits: WaitState[] = [];
  let onWait: (wait: WaitState) => void = () => {};
  const waiting = new Promise<WaitState>((resolve) => {
    onWait = resolve;
  });
  let onServing: (serving: Serving) => void = () => {};
  const serving = new Promise<Serving>((resolve) => {
    onServing = resolve;
  });
  const ended = serveOwner(place.root, {
    ownership: filesOf(place),
    policy: POLICY,
    signals: [],
    signal: abort.signal,
    // Far longer than any test: the wait ends by the first owner's stop or by the abort, never by time.
    waitMs: 600_000,
    onWait: (wait) => {
      waits.push(wait);
      onWait(wait);
    },
    onServing,
  }).then(
    (outcome): { outcome?: ServeOutcome; error?: unknown } => ({ outcome }),
    (error: unknown): { outcome?: ServeOutcome; error?: unknown } => {
      witness(error);
      return { error };
    },
  );
  const waiter = { waits, waiting, serving, ended, abort: () => abort.abort() };
  waiters.push(waiter);
  return waiter;
}

/** The workspace's tickets now in `<stateHome>/waiters/` (its staging folder aside). */
function ticketsOf(place: Place): string[] {
  const { folder, prefix } = waitTicketPlaces(place.root, place.stateHome);
  return namesIn(folder).filter((name) => name.startsWith(prefix));
}

describe('serveOwner({ waitMs }) behind a live owner', () => {
  it("tells onWait the holder's pid, serves once the first owner stops, and connect reaches it", async () => {
    const place = placeWithWorkspace();
    const first = spawnOwner(place);
    const firstServing = await servingOf(first);
    capabilityOf(place);
    const waiter = waitBehind(place);
    const wait = await waiter.waiting;
    expect(wait.holder?.pid).toBe(first.pid);
    expect(wait.ahead).toBe(0);
    expect(ticketsOf(place)).toHaveLength(1);

    const toFirst = await connect(place.root, { ownership: filesOf(place) });
    witness(toFirst);
    expect(toFirst.epoch).toBe(firstServing.epoch);
    const stop = await toFirst.request('POST', '/v1/stop', {});
    witness(stop);
    expect(stop.status).toBe(202);
    expect((await first.closed).code).toBe(0);

    const serving = await waiter.serving;
    capabilityOf(place);
    expect(serving).toMatchObject({ root: place.root, pid: process.pid });
    expect(serving.epoch).not.toBe(firstServing.epoch);
    expect(waiter.waits.every((seen) => seen.holder === undefined || seen.holder.pid === first.pid)).toBe(true);
    expect(ticketsOf(place)).toEqual([]);

    const toWaiter = await connect(place.root, { ownership: filesOf(place) });
    witness(toWaiter);
    expect(toWaiter.endpoint).toBe(serving.endpoint);
    expect(toWaiter.epoch).toBe(serving.epoch);
    expect(toWaiter.status).toEqual({ epoch: serving.epoch, phase: 'idle', root: place.root, pid: process.pid });
  });

  it('an abort during the wait rejects conflict, nothing acquired, no ticket left; the first owner serves on', async () => {
    const place = placeWithWorkspace();
    const first = spawnOwner(place);
    const firstServing = await servingOf(first);
    capabilityOf(place);
    const waiter = waitBehind(place);
    expect((await waiter.waiting).holder?.pid).toBe(first.pid);
    expect(ticketsOf(place)).toHaveLength(1);

    waiter.abort();
    const { outcome, error } = await waiter.ended;
    expect(outcome).toBeUndefined();
    expect(ContractError.is(error, 'conflict')).toBe(true);
    expect((error as ContractError).message).toContain('nothing was acquired');
    expect(ticketsOf(place)).toEqual([]);

    const toFirst = await connect(place.root, { ownership: filesOf(place) });
    witness(toFirst);
    expect(toFirst.epoch).toBe(firstServing.epoch);
    expect(toFirst.status.pid).toBe(first.pid);
  });
});
