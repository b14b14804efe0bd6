import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  snapshotInspection,
  watchInspections,
  type Inspection,
  type OwnerSummary,
  type WatchOptions,
  type WatchSnapshot,
  type WatchWakeups,
} from './index.js';

/** No poll within a test's life: only the source's wake-ups read. */
const NO_POLL = 3_600_000;

const OWNER: OwnerSummary = {
  epoch: 'epoch-1',
  endpoint: 'http://127.0.0.1:40001',
  pid: 4242,
  host: 'host',
  phase: 'idle',
  process: 'live',
};
const ABSENT: Inspection = { status: 'absent' };
const SERVING: Inspection = { status: 'unavailable', reason: 'an idle owner', owner: OWNER };
const STOPPING: Inspection = { status: 'stopping', owner: { ...OWNER, phase: 'stopping' } };
const STOPPED: Inspection = { status: 'stopped', epoch: OWNER.epoch };
const CRASHED: Inspection = { status: 'unavailable', reason: 'an idle owner', owner: { ...OWNER, process: 'absent' } };

interface Read {
  readonly resolve: (inspection: Inspection) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * An `inspect` whose every read waits for the test to answer it, and a source whose wake-ups the
 * test sends: the watch engine driven step by step, with no clock involved.
 */
class Harness {
  readonly #pending: Read[] = [];
  #called: (() => void) | undefined;
  #wakeups: WatchWakeups | undefined;
  /** How many reads `inspect` began, and how many times the source was stopped. */
  reads = 0;
  stops = 0;

  readonly inspect = (): Promise<Inspection> =>
    new Promise((resolve, reject) => {
      this.reads += 1;
      this.#pending.push({ resolve, reject });
      this.#called?.();
    });

  watch(options: WatchOptions = {}): AsyncIterator<WatchSnapshot> {
    const watch = watchInspections(
      this.inspect,
      (wakeups) => {
        this.#wakeups = wakeups;
        return () => {
          this.stops += 1;
        };
      },
      { pollMs: NO_POLL, ...options },
    );
    return watch[Symbol.asyncIterator]();
  }

  get wakeups(): WatchWakeups {
    return this.#wakeups!;
  }

  /** The next read, once the watch has begun it (reads go one at a time, each after the last was delivered). */
  async #nextRead(): Promise<Read> {
    while (this.#pending.length === 0) {
      await new Promise<void>((resolve) => {
        this.#called = resolve;
      });
    }
    return this.#pending.shift()!;
  }

  /** Answers the next read with `inspection`. */
  async answer(inspection: Inspection): Promise<void> {
    (await this.#nextRead()).resolve(inspection);
  }

  /** Fails the next read. */
  async fail(error: unknown): Promise<void> {
    (await this.#nextRead()).reject(error);
  }

  /** Waits until the watch has begun another read: every read before it has been delivered (or dropped). */
  async readBegun(): Promise<void> {
    this.#pending.unshift(await this.#nextRead());
  }
}

async function nextValue(iterator: AsyncIterator<WatchSnapshot>): Promise<WatchSnapshot> {
  const result = await iterator.next();
  if (result.done === true) throw new Error('the watch ended');
  return result.value;
}

/** The timers this process keeps: the watch's poll is one of them while it runs. */
function timers(): number {
  return process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
}

describe('watchInspections', () => {
  it('delivers the first answer as seq 1, then one snapshot per change and none for a read that changed nothing', async () => {
    const harness = new Harness();
    const watch = harness.watch();
    await harness.answer(ABSENT);
    expect(await nextValue(watch)).toEqual({ seq: 1, status: 'absent' });

    harness.wakeups.changed();
    await harness.answer(ABSENT);
    harness.wakeups.changed();
    await harness.answer(SERVING);
    expect(await nextValue(watch)).toEqual({
      seq: 2,
      status: 'unavailable',
      reason: 'an idle owner',
      owner: OWNER,
      epoch: OWNER.epoch,
      phase: 'idle',
    });
    harness.wakeups.changed();
    await harness.answer(STOPPING);
    harness.wakeups.changed();
    await harness.answer(STOPPING);
    harness.wakeups.changed();
    await harness.answer(STOPPED);
    expect(await nextValue(watch)).toEqual({
      seq: 3,
      status: 'stopping',
      owner: STOPPING.owner,
      epoch: OWNER.epoch,
      phase: 'stopping',
    });
    expect(await nextValue(watch)).toEqual({ seq: 4, status: 'stopped', epoch: OWNER.epoch });
    expect(harness.reads).toBe(6);
    await watch.return!();
  });

  it('tells each answer so that snapshotInspection gives back exactly the inspection read', async () => {
    const answers: Inspection[] = [
      ABSENT,
      SERVING,
      { status: 'unavailable', reason: 'between two steps', owner: { ...OWNER, version: 1 }, inProgress: true },
      STOPPING,
      { status: 'quarantined', owner: { ...OWNER, phase: 'quarantined' } },
      { status: 'unavailable', reason: 'unreadable' },
      STOPPED,
      { status: 'stopped', epoch: OWNER.epoch, version: 3 },
      { status: 'stopped', epoch: null },
    ];
    const harness = new Harness();
    const watch = harness.watch();
    for (const [index, inspection] of answers.entries()) {
      if (index > 0) harness.wakeups.changed();
      await harness.answer(inspection);
      expect(snapshotInspection(await nextValue(watch))).toEqual(inspection);
    }
    await watch.return!();
  });

  it('delivers the first answer after a gap as a resync even when nothing changed, under the number it had', async () => {
    const harness = new Harness();
    const watch = harness.watch();
    await harness.answer(SERVING);
    expect(await nextValue(watch)).toMatchObject({ seq: 1, status: 'unavailable' });
    harness.wakeups.gap();
    await harness.answer(SERVING);
    // The same state, so the same number: what is new is only that changes may have been missed.
    expect(await nextValue(watch)).toMatchObject({ seq: 1, status: 'unavailable', phase: 'idle', resync: true });
    harness.wakeups.gap();
    await harness.answer(STOPPED);
    expect(await nextValue(watch)).toEqual({ seq: 2, status: 'stopped', epoch: OWNER.epoch, resync: true });
    // The gap is spent: the next change is an ordinary one.
    harness.wakeups.changed();
    await harness.answer(ABSENT);
    expect(await nextValue(watch)).toEqual({ seq: 3, status: 'absent' });
    await watch.return!();
  });

  it('delivers a recorded change that only the poll found as a resync', async () => {
    const harness = new Harness();
    const watch = harness.watch({ pollMs: 5 });
    await harness.answer(SERVING);
    expect(await nextValue(watch)).toMatchObject({ seq: 1 });
    // Each poll reads; the answer changes at one of them, and no notification announced it.
    await harness.answer(SERVING);
    await harness.answer(STOPPING);
    expect(await nextValue(watch)).toMatchObject({ seq: 2, status: 'stopping', resync: true });
    await watch.return!();
  });

  it('delivers a record whose version grew by more than one as a resync, through passing states that tell no record', async () => {
    const harness = new Harness();
    const watch = harness.watch();
    const serving = (version: number): Inspection => ({ ...SERVING, owner: { ...OWNER, version } });
    const passing: Inspection = { status: 'unavailable', reason: 'a release in progress', inProgress: true };
    await harness.answer(serving(1));
    expect(await nextValue(watch)).toMatchObject({ seq: 1, version: 1 });
    // Its next write, with a passing state read between: no phase passed over.
    for (const inspection of [passing, serving(2)]) {
      harness.wakeups.changed();
      await harness.answer(inspection);
    }
    expect(await nextValue(watch)).toMatchObject({ seq: 2, inProgress: true });
    expect(await nextValue(watch)).toEqual({ seq: 3, ...serving(2), epoch: OWNER.epoch, phase: 'idle', version: 2 });
    // Its stopping (version 3) came and went before the passing state was read: its stopped (4) says so.
    for (const inspection of [passing, { ...STOPPED, version: 4 }]) {
      harness.wakeups.changed();
      await harness.answer(inspection);
    }
    expect(await nextValue(watch)).toMatchObject({ seq: 4, inProgress: true });
    expect(await nextValue(watch)).toEqual({
      seq: 5,
      status: 'stopped',
      epoch: OWNER.epoch,
      phase: 'stopped',
      version: 4,
      resync: true,
    });
    await watch.return!();
  });

  it("delivers a change of the owner's process alone that the poll found as an ordinary change: no file announces it", async () => {
    const harness = new Harness();
    const watch = harness.watch({ pollMs: 5 });
    await harness.answer(SERVING);
    expect(await nextValue(watch)).toMatchObject({ seq: 1, owner: { process: 'live' } });
    await harness.answer(CRASHED);
    const crashed = await nextValue(watch);
    expect(crashed).toEqual({
      seq: 2,
      status: 'unavailable',
      reason: 'an idle owner',
      owner: CRASHED.owner,
      epoch: OWNER.epoch,
      phase: 'idle',
    });
    expect(crashed.resync).toBeUndefined();
    await watch.return!();
  });

  it('gives a consumer that stalls past maxQueued the state now as one resync, its seq skipping what it missed', async () => {
    const harness = new Harness();
    const watch = harness.watch({ maxQueued: 2 });
    await harness.answer(ABSENT);
    expect(await nextValue(watch)).toEqual({ seq: 1, status: 'absent' });
    // The consumer stalls: two snapshots wait (seq 2 and 3), the third change overflows them.
    for (const inspection of [SERVING, STOPPING, STOPPED]) {
      harness.wakeups.changed();
      await harness.answer(inspection);
    }
    harness.wakeups.changed();
    await harness.readBegun();
    expect(await nextValue(watch)).toEqual({ seq: 4, status: 'stopped', epoch: OWNER.epoch, resync: true });
    // Back in step: the next change comes as it is.
    await harness.answer(ABSENT);
    expect(await nextValue(watch)).toEqual({ seq: 5, status: 'absent' });
    await watch.return!();
  });

  it('answers unavailable, naming the error, when inspect rejects, and goes on', async () => {
    const harness = new Harness();
    const watch = harness.watch();
    await harness.fail(new Error('the disk went away'));
    const failed = await nextValue(watch);
    expect(failed).toMatchObject({ seq: 1, status: 'unavailable' });
    expect(failed.reason).toContain('the disk went away');
    harness.wakeups.changed();
    await harness.answer(ABSENT);
    expect(await nextValue(watch)).toEqual({ seq: 2, status: 'absent' });
    await watch.return!();
  });

  it('ends when the signal aborts: a waiting consumer gets done, the source is stopped, the poll timer cleared', async () => {
    const before = timers();
    const harness = new Harness();
    const controller = new AbortController();
    const watch = harness.watch({ signal: controller.signal, pollMs: 60_000 });
    expect(timers()).toBe(before + 1);
    await harness.answer(ABSENT);
    expect(await nextValue(watch)).toMatchObject({ seq: 1 });
    const waiting = watch.next();
    controller.abort();
    expect(await waiting).toEqual({ value: undefined, done: true });
    expect(harness.stops).toBe(1);
    expect(timers()).toBe(before);
    // Wake-ups after the end read nothing, and the iteration stays ended.
    harness.wakeups.changed();
    expect(harness.reads).toBe(1);
    expect(await watch.next()).toEqual({ value: undefined, done: true });
    expect(harness.stops).toBe(1);
  });

  it('ends at once on a signal aborted before it began', async () => {
    const before = timers();
    const harness = new Harness();
    const controller = new AbortController();
    controller.abort();
    const watch = harness.watch({ signal: controller.signal });
    expect(await watch.next()).toEqual({ value: undefined, done: true });
    expect(harness.reads).toBe(0);
    expect(harness.stops).toBe(1);
    expect(timers()).toBe(before);
  });

  it('ends when the consumer breaks out of for await: the source is stopped, the poll timer cleared', async () => {
    const before = timers();
    const harness = new Harness();
    const watch = watchInspections(
      harness.inspect,
      () => () => {
        harness.stops += 1;
      },
      { pollMs: 60_000 },
    );
    const seen: WatchSnapshot[] = [];
    const reading = harness.answer(ABSENT);
    for await (const snapshot of watch) {
      seen.push(snapshot);
      break;
    }
    await reading;
    expect(seen).toEqual([{ seq: 1, status: 'absent' }]);
    expect(harness.stops).toBe(1);
    expect(timers()).toBe(before);
  });

  it('for any inspections and wake-ups, delivers numbers that never go back, a repeat only as a resync, and the last read last', async () => {
    const inspections = [ABSENT, SERVING, CRASHED, STOPPING, STOPPED];
    const step = fc.record({
      wakeup: fc.constantFrom('changed' as const, 'gap' as const),
      answer: fc.integer({ min: 0, max: inspections.length - 1 }),
      consume: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: inspections.length - 1 }),
        fc.array(step, { maxLength: 30 }),
        fc.integer({ min: 1, max: 4 }),
        async (first, steps, maxQueued) => {
          const harness = new Harness();
          const controller = new AbortController();
          const watch = harness.watch({ signal: controller.signal, maxQueued });
          await harness.answer(inspections[first]!);
          const delivered: WatchSnapshot[] = [];
          // At most one next() waits at a time, so what it gets keeps its place in the order.
          let waiting: { result?: IteratorResult<WatchSnapshot>; promise: Promise<void> } | undefined;
          const collect = (result: IteratorResult<WatchSnapshot>): void => {
            if (result.done !== true) delivered.push(result.value);
          };
          let last = inspections[first]!;
          for (const { wakeup, answer, consume } of steps) {
            if (consume && waiting === undefined) {
              const request: { result?: IteratorResult<WatchSnapshot>; promise: Promise<void> } = {
                promise: watch.next().then((result) => {
                  request.result = result;
                }),
              };
              waiting = request;
            } else if (consume && waiting?.result !== undefined) {
              collect(waiting.result);
              waiting = undefined;
            }
            harness.wakeups[wakeup]();
            await harness.answer(inspections[answer]!);
            last = inspections[answer]!;
          }
          // Another read begun: the last answer has been delivered; then the rest is drained.
          harness.wakeups.changed();
          await harness.readBegun();
          controller.abort();
          if (waiting !== undefined) {
            await waiting.promise;
            collect(waiting.result!);
          }
          for (let result = await watch.next(); result.done !== true; result = await watch.next()) collect(result);
          // The first snapshot, unless the consumer stalled past it before it ever asked.
          if (delivered[0]!.seq !== 1) expect(delivered[0]!.resync).toBe(true);
          for (const [index, snapshot] of delivered.entries()) {
            const previous = delivered[index - 1];
            if (previous === undefined) continue;
            expect(snapshot.seq).toBeGreaterThanOrEqual(previous.seq);
            if (snapshot.seq === previous.seq) expect(snapshot.resync).toBe(true);
            // A number skipped is a change not delivered: only a resync may follow one.
            if (snapshot.seq > previous.seq + 1) expect(snapshot.resync).toBe(true);
          }
          expect(stateOf(delivered.at(-1)!)).toEqual(stateOf(await firstSnapshotOf(last)));
        },
      ),
      { numRuns: 200 },
    );
  });
});

/** A snapshot without its number and its resync mark: the state it says. */
function stateOf(snapshot: WatchSnapshot): Record<string, unknown> {
  return Object.fromEntries(Object.entries(snapshot).filter(([key]) => key !== 'seq' && key !== 'resync'));
}

/** What a fresh watch delivers first for `inspection`. */
async function firstSnapshotOf(inspection: Inspection): Promise<WatchSnapshot> {
  const harness = new Harness();
  const watch = harness.watch();
  await harness.answer(inspection);
  const snapshot = await nextValue(watch);
  await watch.return!();
  return snapshot;
}
