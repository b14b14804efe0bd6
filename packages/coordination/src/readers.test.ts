import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  countsOf,
  loopbackEndpoint,
  handPlaces,
  makePlace,
  makeWorkspace,
  messageOf,
  messagesOf,
  pathExists,
} from '@leasehold/test-utils';
import { OWNER_CONFIG, spawnCyclers } from '../test/process-helpers.js';
import { acquireWorkspace, inspectWorkspace, openWorkspace, type Inspection } from './index.js';

afterEach(cleanUp);

const WRITERS = 3;
const ITERATIONS = 30;

describe('readers racing writers', () => {
  it(`inspect, assert and watch stay truthful while ${WRITERS} processes acquire and release other roots`, async () => {
    const place = makePlace('process');
    const held = openWorkspace(makeWorkspace(place, 'held'), { stateHome: place.stateHome, lockWaitMs: 60_000 });
    const neverAcquired = openWorkspace(makeWorkspace(place, 'never-acquired'), { stateHome: place.stateHome });
    const lease = await acquireWorkspace(held, OWNER_CONFIG, loopbackEndpoint(43_000));
    // What files alone can say of a live idle owner; other workspaces' transactions never change it.
    const heldAnswer = inspectWorkspace(held);
    expect(heldAnswer).toMatchObject({
      status: 'unavailable',
      owner: { pid: process.pid, epoch: lease.registration.epoch, phase: 'idle' },
    });
    const lockPath = handPlaces(place.stateHome, '/').registryLock;
    const lost: unknown[] = [];
    const stopWatching = lease.watch(5, (error) => lost.push(error));

    const writers = spawnCyclers(place, WRITERS, 'writer', 43_001, ITERATIONS);
    await Promise.all(writers.map((writer) => messageOf(writer, 'ready')));
    let running = true;
    const ended = Promise.all(writers.map((writer) => writer.closed)).then((ends) => {
      running = false;
      return ends;
    });
    for (const writer of writers) writer.send('go');

    // The readers loop until every writer has exited; a turn of the event loop between
    // iterations lets the exit events (and the lease's watch timer) run.
    const heldAnswers: Inspection[] = [];
    const otherAnswers: Inspection[] = [];
    const thrown: unknown[] = [];
    let iterations = 0;
    let withLockPresent = 0;
    while (running) {
      iterations += 1;
      if (pathExists(lockPath)) withLockPresent += 1;
      for (const [coordination, answers] of [
        [held, heldAnswers],
        [neverAcquired, otherAnswers],
      ] as const) {
        try {
          answers.push(inspectWorkspace(coordination));
        } catch (error) {
          thrown.push(error);
        }
      }
      try {
        lease.assert();
      } catch (error) {
        thrown.push(error);
      }
      await nextTurn();
    }
    const ends = await ended;

    const statusesOf = (answers: readonly Inspection[]) => countsOf(answers.map((answer) => answer.status));
    const reasonsOf = (answers: readonly Inspection[]) =>
      countsOf(answers.map((answer) => (answer.status === 'unavailable' ? answer.reason : answer.status)));
    console.log(
      `${iterations} reader iterations (${withLockPresent} began with a registry lock present) while ${WRITERS} writers ran ${ITERATIONS} acquire/release cycles each`,
      {
        held: reasonsOf(heldAnswers),
        neverAcquired: reasonsOf(otherAnswers),
      },
    );

    for (const [index, end] of ends.entries()) {
      expect(end, end.stderr).toMatchObject({ code: 0, signal: null });
      expect(messagesOf(writers[index]!, 'iteration')).toHaveLength(ITERATIONS);
    }
    expect(thrown).toEqual([]);
    expect(lost).toEqual([]);
    // Every read of each workspace gave its one true answer: no registry transaction of another
    // workspace ever made it unavailable (or anything else).
    expect(heldAnswers.length).toBe(iterations);
    expect(countsOf(heldAnswers.map((answer) => JSON.stringify(answer)))).toEqual({
      [JSON.stringify(heldAnswer)]: iterations,
    });
    expect(statusesOf(otherAnswers)).toEqual({ absent: iterations });
    stopWatching();
    lease.assert();
    await lease.release();
    expect(inspectWorkspace(held)).toMatchObject({ status: 'stopped', epoch: lease.registration.epoch });
    expect(inspectWorkspace(neverAcquired)).toEqual({ status: 'absent' });
  });
});
