// What the power-loss exploration proved of each protocol's fsyncs, pinned
// in one place: packages/recovery/src/power-loss*.test.ts asserts
// that its exploration finds exactly these figures, and the bench prints the
// fsyncs it measures of the same operations against them.

/** The protocols the power-loss harness records (packages/recovery/test/power-loss.ts). */
export type PowerLossProtocol = 'acquire-fresh' | 'acquire-stopped' | 'phase' | 'release' | 'recover' | 'transaction';

/**
 * What dropping fsyncs from one protocol's trace showed, fsync by fsync:
 * each is named by its place among the trace's fsyncs (of files and of
 * folders), from 1 in trace order.
 */
export interface ProvedFsyncs {
  /** The fsyncs the trace makes. */
  readonly fsyncs: number;
  /** Those no state needs when each is dropped alone; every other is needed alone (but the unproved). */
  readonly notNeededAlone: readonly number[];
  /** Those whose drop alone left a crash point with more states than the enumeration's cap: nothing proved either way, so kept. */
  readonly unprovedAlone: readonly number[];
  /**
   * Of `notNeededAlone`, dropped one by one in trace order (each kept dropped
   * while every state still holds): those that broke a state once those
   * before them were dropped, and so were kept.
   */
  readonly keptTogether: readonly number[];
  /** Of `notNeededAlone`, those kept in the same pass because a crash point had more states than the cap. */
  readonly unprovedTogether: readonly number[];
}

/** The fsyncs of `notNeededAlone` that stay dropped in the one-by-one pass: with all of them gone, every state still holds. */
export function droppedTogether(proved: ProvedFsyncs): number[] {
  return proved.notNeededAlone.filter(
    (fsync) => !proved.keptTogether.includes(fsync) && !proved.unprovedTogether.includes(fsync),
  );
}

/** The figures the bench and the READMEs give: how many are needed alone, kept together, unproved, and how many a sound set keeps. */
export function provedCounts(proved: ProvedFsyncs): {
  readonly neededAlone: number;
  readonly keptTogether: number;
  readonly unproved: number;
  readonly sufficient: number;
} {
  return {
    neededAlone: proved.fsyncs - proved.notNeededAlone.length - proved.unprovedAlone.length,
    keptTogether: proved.keptTogether.length,
    unproved: proved.unprovedAlone.length + proved.unprovedTogether.length,
    sufficient: proved.fsyncs - droppedTogether(proved).length,
  };
}

/**
 * The bounds on the fewest fsyncs the protocol needs under the model. The
 * upper is the sound set found. The lower is the fsyncs needed alone, one
 * more when some other was kept because a state broke: the fsyncs dropped
 * before it and it, none needed alone, cannot all go, so one of them stays.
 */
export function fsyncBounds(proved: ProvedFsyncs): { readonly lower: number; readonly upper: number } {
  const counts = provedCounts(proved);
  return { lower: counts.neededAlone + (counts.keptTogether > 0 ? 1 : 0), upper: counts.sufficient };
}

const NONE: readonly number[] = [];

/** What the exploration found. */
export const PROVED_FSYNCS: Readonly<Record<PowerLossProtocol, ProvedFsyncs>> = {
  'acquire-fresh': {
    fsyncs: 28,
    notNeededAlone: [3, 4, 9, 17],
    unprovedAlone: [26],
    keptTogether: NONE,
    unprovedTogether: NONE,
  },
  'acquire-stopped': {
    fsyncs: 12,
    notNeededAlone: [10],
    unprovedAlone: NONE,
    keptTogether: NONE,
    unprovedTogether: NONE,
  },
  phase: { fsyncs: 2, notNeededAlone: NONE, unprovedAlone: NONE, keptTogether: NONE, unprovedTogether: NONE },
  release: { fsyncs: 7, notNeededAlone: NONE, unprovedAlone: NONE, keptTogether: NONE, unprovedTogether: NONE },
  recover: { fsyncs: 10, notNeededAlone: NONE, unprovedAlone: NONE, keptTogether: NONE, unprovedTogether: NONE },
  transaction: { fsyncs: 3, notNeededAlone: NONE, unprovedAlone: NONE, keptTogether: NONE, unprovedTogether: NONE },
};
