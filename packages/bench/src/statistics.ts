/** The figures one series of timings is reported by, in milliseconds. */
export interface Summary {
  readonly samples: number;
  readonly median: number;
  readonly p99: number;
  readonly min: number;
  readonly max: number;
}

/** The value at quantile `q` (0..1) of ascending `sorted`, by the nearest-rank method. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) throw new RangeError('quantile: no samples');
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1]!;
}

/** The median of `values` (the mean of the two middle values for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median: no samples');
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/**
 * Median, p99 (nearest rank: with fewer than 100 samples it is the maximum),
 * minimum and maximum of `values`.
 * @throws RangeError when there are no samples.
 */
export function summarize(values: readonly number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    samples: sorted.length,
    median: median(sorted),
    p99: quantile(sorted, 0.99),
    min: sorted[0]!,
    max: sorted[sorted.length - 1]!,
  };
}
