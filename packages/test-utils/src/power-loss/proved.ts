// What the power-loss exploration proved of each protocol's fsyncs, pinned
// in one place: packages/recovery/src/power-loss-fsyncs*.test.ts asserts
// that its exploration finds exactly these figures, and the bench prints the
// fsyncs it measures of the same operations against them.

/** The protocols the power-loss harness records (packages/recovery/test/power-loss.ts). */
export type PowerLossProtocol = 'acquire-fresh' | 'acquire-stopped' | 'phase' | 'release' | 'recover' | 'transaction';

/** What dropping fsyncs from one protocol's trace showed. */
export interface ProvedFsyncs {
  /** The fsyncs the trace makes (of files and of folders). */
  readonly fsyncs: number;
  /** How many break some state when dropped alone: every set of fsyncs that keeps every state sound holds each of them. */
  readonly neededAlone: number;
  /**
   * Of the others, dropped one by one in trace order (each kept dropped
   * while every state still holds), how many broke a state once those before
   * them were dropped, and so were kept.
   */
  readonly keptTogether: number;
  /** How many were kept because a crash point had more states than the enumeration's cap: nothing proved either way. */
  readonly unproved: number;
  /** The fsyncs left once the others were dropped: a sound set, none of whose fsyncs can be dropped as well (but the unproved). */
  readonly sufficient: number;
}

/**
 * The bounds on the fewest fsyncs the protocol needs under the model. The
 * upper is the sound set found. The lower is the fsyncs needed alone, one
 * more when some other was kept because a state broke: the fsyncs dropped
 * before it and it, none needed alone, cannot all go, so one of them stays.
 */
export function fsyncBounds(proved: ProvedFsyncs): { readonly lower: number; readonly upper: number } {
  return { lower: proved.neededAlone + (proved.keptTogether > 0 ? 1 : 0), upper: proved.sufficient };
}

/** The figures, as the exploration found them. */
export const PROVED_FSYNCS: Readonly<Record<PowerLossProtocol, ProvedFsyncs>> = {
  'acquire-fresh': { fsyncs: 24, neededAlone: 19, keptTogether: 0, unproved: 1, sufficient: 20 },
  'acquire-stopped': { fsyncs: 10, neededAlone: 9, keptTogether: 0, unproved: 0, sufficient: 9 },
  phase: { fsyncs: 2, neededAlone: 2, keptTogether: 0, unproved: 0, sufficient: 2 },
  release: { fsyncs: 6, neededAlone: 6, keptTogether: 0, unproved: 0, sufficient: 6 },
  recover: { fsyncs: 9, neededAlone: 9, keptTogether: 0, unproved: 0, sufficient: 9 },
  transaction: { fsyncs: 3, neededAlone: 3, keptTogether: 0, unproved: 0, sufficient: 3 },
};
