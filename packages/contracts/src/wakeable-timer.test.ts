import { describe, expect, it } from 'vitest';
import { wakeableTimer } from './wakeable-timer.js';

/** Whether `promise` has settled by the time the microtasks and timers already due have run. */
async function settled(promise: Promise<void>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('wakeableTimer', () => {
  it('ends when woken, not before', async () => {
    const timer = wakeableTimer(3_600_000);
    expect(await settled(timer.ended)).toBe(false);
    timer.wake();
    expect(await settled(timer.ended)).toBe(true);
    timer.clear();
  });

  it('ends when its signal aborts, and at once for one aborted before', async () => {
    const controller = new AbortController();
    const timer = wakeableTimer(undefined, controller.signal);
    expect(await settled(timer.ended)).toBe(false);
    controller.abort();
    expect(await settled(timer.ended)).toBe(true);
    timer.clear();
    const late = wakeableTimer(undefined, AbortSignal.abort());
    expect(await settled(late.ended)).toBe(true);
    late.clear();
  });

  it('ends after its time; without one, only by a wake or an abort', async () => {
    const timed = wakeableTimer(0);
    await timed.ended;
    timed.clear();
    const untimed = wakeableTimer(undefined);
    expect(await settled(untimed.ended)).toBe(false);
    untimed.wake();
    await untimed.ended;
    untimed.clear();
  });
});
