/** Adds one timing, in milliseconds, to a named series (an operation's parts, such as acquire and release). */
export type Recorder = (series: string, milliseconds: number) => void;

/**
 * One measured operation. `sample` runs it once and returns the time of the
 * measured part in milliseconds; whatever must happen around it (a fresh
 * name, a file to remove, a clean-up) runs inside `sample` but off the clock.
 */
export interface Operation {
  readonly id: string;
  readonly label: string;
  sample(record: Recorder): number | Promise<number>;
}

/** The untimed preparation, the timed run and the untimed clean-up of one sample. */
export interface Steps<State> {
  prepare?(): State;
  run(state: State): void;
  finish?(state: State): void;
}

/** Like `Steps`, for operations whose measured part is asynchronous. */
export interface AsyncSteps<State> {
  prepare?(): State | Promise<State>;
  run(state: State, record: Recorder): Promise<void>;
  finish?(state: State): void | Promise<void>;
}

/** Nanoseconds from a monotonic clock. */
export const now = (): bigint => process.hrtime.bigint();

/** Milliseconds between two readings of `now`. */
export const elapsed = (start: bigint, end: bigint = now()): number => Number(end - start) / 1e6;

/** A synchronous operation: only `run` is on the clock. */
export function timed<State>(id: string, label: string, steps: Steps<State>): Operation {
  return {
    id,
    label,
    sample() {
      const state = steps.prepare?.() as State;
      const start = now();
      steps.run(state);
      const milliseconds = elapsed(start);
      steps.finish?.(state);
      return milliseconds;
    },
  };
}

/** An asynchronous operation: only `run` is on the clock; it may record its parts. */
export function timedAsync<State>(id: string, label: string, steps: AsyncSteps<State>): Operation {
  return {
    id,
    label,
    async sample(record) {
      const state = (await steps.prepare?.()) as State;
      const start = now();
      await steps.run(state, record);
      const milliseconds = elapsed(start);
      await steps.finish?.(state);
      return milliseconds;
    },
  };
}

/** A small seeded generator (mulberry32): the same order for the same round in every run. */
function seeded(seed: number): () => number {
  let state = seed | 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let mixed = Math.imul(state ^ (state >>> 15), 1 | state);
    mixed = (mixed + Math.imul(mixed ^ (mixed >>> 7), 61 | mixed)) ^ mixed;
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The order of `count` operations in round `round`: it starts at operation
 * `round mod count` (so the lead rotates through every operation), and the
 * others follow in an order shuffled by a generator seeded with the round.
 * A plain rotation would keep the cyclic order, so that each operation
 * always ran right after the same neighbour and inherited its cold caches
 * or its journal commit; on this benchmark that alone moved a 30 µs read by
 * a third.
 */
export function rotation(count: number, round: number): number[] {
  const start = round % count;
  const rest = Array.from({ length: count }, (_, index) => index).filter((index) => index !== start);
  const random = seeded(round + 1);
  for (let index = rest.length - 1; index > 0; index -= 1) {
    const other = Math.floor(random() * (index + 1));
    [rest[index], rest[other]] = [rest[other]!, rest[index]!];
  }
  return [start, ...rest];
}

export interface RunPlan {
  /** Rounds whose timings are kept. */
  readonly rounds: number;
  /** Rounds run first and discarded (JIT, caches, the first folder creations). */
  readonly warmupRounds: number;
  /** Called after every kept round (for work interleaved with the rounds, such as contention trials). */
  readonly afterRound?: (round: number) => Promise<void> | void;
  /** Called after every round with the rounds done and the total. */
  readonly progress?: (done: number, total: number) => void;
}

/**
 * Runs every operation once per round, in an order that rotates from round
 * to round (see `rotation`), so that drift of a shared machine lands on every
 * operation alike. Timings of the warm-up rounds are discarded. Returns every
 * kept timing by series id.
 */
export async function runInterleaved(operations: readonly Operation[], plan: RunPlan): Promise<Map<string, number[]>> {
  const series = new Map<string, number[]>();
  const ids = new Set(operations.map((operation) => operation.id));
  if (ids.size !== operations.length) throw new Error('runInterleaved: two operations share an id');
  const total = plan.warmupRounds + plan.rounds;
  for (let round = 0; round < total; round += 1) {
    const kept = round >= plan.warmupRounds;
    const record: Recorder = (id, milliseconds) => {
      if (!kept) return;
      let values = series.get(id);
      if (values === undefined) series.set(id, (values = []));
      values.push(milliseconds);
    };
    for (const index of rotation(operations.length, round)) {
      const operation = operations[index]!;
      const milliseconds = await operation.sample(record);
      record(operation.id, milliseconds);
    }
    if (kept) await plan.afterRound?.(round - plan.warmupRounds);
    plan.progress?.(round + 1, total);
    // Let timers and I/O callbacks run between rounds, never inside a measured operation.
    await new Promise((resolve) => setImmediate(resolve));
  }
  return series;
}
