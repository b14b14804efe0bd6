import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROVED_FSYNCS, countsOf, droppedTogether, provedCounts, type ProvedFsyncs } from '@leasehold/test-utils';
import { fsyncsOf, isLockPublication, without, type Outcome } from './power-loss-fsyncs.js';
import { STATE_SHARDS, recordProtocol, type Protocol, type Recorded } from './power-loss.js';
import { exploreTrace, type Exploration, type Verdicts } from './power-loss-exploration.js';
import { promiseBroken } from './power-loss-promises.js';

// The tests of one protocol under the power-loss model (the harness:
// ./power-loss.ts; the fsync method: ./power-loss-fsyncs.ts), as a table:
// the trace is recorded once (beforeAll), and every exploration of it, whole
// or without some fsyncs, is shared out over tests of a few hundred states
// each (STATE_SHARDS), so that each stays far inside its bound and passes
// alone. The verdicts of the states already checked are kept for the file:
// a check depends on the state alone, so a state that the whole trace and a
// trace without an fsync both leave is checked once.

/** What one fsync's drop must show, and with which earlier drops (the pinned one-by-one pass). */
interface FsyncDrop {
  readonly title: string;
  /** The fsyncs dropped, by their place among the trace's fsyncs (from 1). */
  readonly dropped: readonly number[];
  readonly expected: Outcome['kind'];
}

/** Pass 1, each fsync alone; pass 2, each not needed alone with those before it that stayed dropped (PROVED_FSYNCS). */
function fsyncDrops(proved: ProvedFsyncs): FsyncDrop[] {
  const alone = Array.from({ length: proved.fsyncs }, (_, index): FsyncDrop => {
    const fsync = index + 1;
    const expected = proved.notNeededAlone.includes(fsync)
      ? 'holds'
      : proved.unprovedAlone.includes(fsync)
        ? 'unproved'
        : 'broken';
    const what = {
      holds: 'not needed alone',
      unproved: 'unproved alone (a crash point over the cap)',
      broken: 'needed alone',
    }[expected];
    return { title: `fsync ${fsync} of ${proved.fsyncs}: ${what}`, dropped: [fsync], expected };
  });
  const stayed = droppedTogether(proved);
  const together = proved.notNeededAlone.map((fsync): FsyncDrop => {
    const before = stayed.filter((earlier) => earlier < fsync);
    const expected = proved.keptTogether.includes(fsync)
      ? 'broken'
      : proved.unprovedTogether.includes(fsync)
        ? 'unproved'
        : 'holds';
    return {
      title: `fsync ${fsync} dropped with ${before.length === 0 ? 'no other' : `fsyncs ${before.join(', ')}`}: ${expected === 'holds' ? 'stays dropped' : `kept (${expected})`}`,
      dropped: [...before, fsync],
      expected,
    };
  });
  return [...alone, ...together.filter((drop) => drop.dropped.length > 1)];
}

/** Declares the tests of one protocol: every crash state of its trace, then every fsync's drop. */
export function powerLossTable({ name, protocol }: Protocol): void {
  describe(`power-loss crash states: ${name}`, () => {
    let recorded: Recorded;
    const verdicts: Verdicts = new Map();
    const explored: Exploration[] = [];
    const shards = STATE_SHARDS[protocol];
    beforeAll(async () => {
      recorded = await recordProtocol(protocol);
    });
    afterAll(() => {
      if (explored.length === 0) return;
      const { ops, points } = recorded;
      const yielded = points.reduce((sum, point) => sum + point.states.length, 0);
      const checked = explored.reduce((sum, share) => sum + share.inShare, 0);
      console.log(
        `${name}: ${ops.length} ops, ${points.length} crash points, ${yielded} states yielded, ${checked} distinct states checked`,
        {
          'inspect before recovery': countsOf(explored.flatMap((share) => share.inspected)),
          'a new acquire while fenced': countsOf(explored.flatMap((share) => share.acquired)),
          recovery: countsOf(explored.flatMap((share) => share.recovery)),
        },
      );
    });

    it('what the finished operation promised survives a power loss after it returned', () => {
      expect(promiseBroken(recorded, recorded.points.at(-1)!)).toEqual([]);
    });

    for (let index = 0; index < shards; index += 1) {
      it(`every crash state holds, share ${index + 1} of ${shards}`, async () => {
        const share = await exploreTrace(recorded, recorded.points, { verdicts, shard: { index, count: shards } });
        explored.push(share);
        expect(share.inShare).toBeGreaterThan(0);
        expect(share.findings).toEqual([]);
      });
    }

    describe('which fsyncs the model needs', () => {
      const proved = PROVED_FSYNCS[protocol];

      it(`the trace makes ${proved.fsyncs} fsyncs, the registry lock taken without a folder fsync of its own`, () => {
        const fsyncs = fsyncsOf(recorded);
        expect(fsyncs).toHaveLength(proved.fsyncs);
        // The registry lock is published and removed without a registry folder fsync of its own, in every protocol.
        expect(fsyncs.filter((fsync) => fsync.registryLock).map((fsync) => fsync.label)).toEqual([]);
        // And the lock is still taken where it was (link and unlink, once each), so the absence above is not vacuous.
        expect(recorded.ops.filter(isLockPublication)).toHaveLength(protocol === 'phase' ? 0 : 2);
        console.log(
          `${protocol}: ${recorded.ops.length} ops, ${JSON.stringify(provedCounts(proved))}; not needed alone: ${proved.notNeededAlone.map((n) => fsyncs[n - 1]!.label).join('; ') || 'none'}`,
        );
      });

      for (const drop of fsyncDrops(proved)) {
        // A drop that breaks is shown by the first broken state (the new ones are checked first); one that holds, or
        // is unproved, only by every state, shared out like the whole trace's.
        const parts = drop.expected === 'broken' ? 1 : shards;
        for (let index = 0; index < parts; index += 1) {
          it(`${drop.title}${parts === 1 ? '' : `, share ${index + 1} of ${parts}`}`, async () => {
            const fsyncs = fsyncsOf(recorded);
            const indexes = drop.dropped.map((n) => fsyncs[n - 1]!.index);
            const outcome = await without(
              recorded,
              indexes,
              verdicts,
              parts === 1 ? undefined : { index, count: parts },
            );
            const label = drop.dropped.map((n) => fsyncs[n - 1]!.label).join('; ');
            expect(
              { dropped: label, outcome: outcome.kind },
              'why' in outcome ? outcome.why : 'every state holds',
            ).toEqual({ dropped: label, outcome: drop.expected });
            // No file fsync can go: each stages the bytes a link or rename then publishes, and without it the published
            // name may read empty, half or zeros (needed alone, or unproved where the states are too many to enumerate).
            if (drop.dropped.length === 1 && drop.expected === 'holds')
              expect(recorded.ops[indexes[0]!]!.op, label).toBe('fsync-directory');
          });
        }
      }
    });
  });
}
