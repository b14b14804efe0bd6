import { fileOwnership, type Inspection } from '@leasehold/coordination';
import type { ContentionPool } from './contention.js';
import { CONFIG, boundEndpoint, type BenchPlace } from './fixtures.js';
import { elapsed, now } from './harness.js';
import { summarize, type Summary } from './statistics.js';

// Readers under churn (section 8): a reader of one workspace is never
// blinded by other workspaces' writers. Writers churn acquire + release on
// their own workspaces in one state home while this process inspects a
// stopped workspace nobody touches: every answer must be `stopped`, and no
// writer may meet `busy`.

/** What the readers saw and what the writers did, in one measure. */
export interface AvailabilityResult {
  /** Writer processes churning, each on its own workspace. */
  readonly writers: number;
  /** inspect() calls on the untouched, stopped workspace. */
  readonly reads: number;
  /** Answers `stopped` with the workspace's last epoch: the only right answer. */
  readonly stopped: number;
  /** Every answer by what it said (`stopped`, `unavailable`, `unavailable (in progress)`, ...), with its count. */
  readonly answers: Readonly<Record<string, number>>;
  /** Up to three distinct reasons of wrong answers, to say why. */
  readonly wrongReasons: readonly string[];
  /** Time of one inspect() under the churn. */
  readonly inspect: Summary;
  /** The writers' acquire + release cycles from the start of the churn to its end. */
  readonly cycles: number;
  /** Cycles that met `busy` (in acquire or in release). */
  readonly busy: number;
  /** Cycles that failed otherwise. */
  readonly failed: number;
  /** The longest writer's churn, in milliseconds. */
  readonly churnMs: number;
}

function answerOf(inspection: Inspection, epoch: string): string {
  if (inspection.status === 'stopped') return inspection.epoch === epoch ? 'stopped' : 'stopped (another epoch)';
  if (inspection.status === 'unavailable' && inspection.inProgress === true) return 'unavailable (in progress)';
  return inspection.status;
}

/**
 * Makes a workspace in the pool's state home and stops it (acquire +
 * release, while the workers are idle); then the first `writers` workers
 * churn while this process calls inspect() on it `reads` times. The churn
 * is under way before the first read (every writer finished a cycle) and
 * stops after the last.
 */
export async function measureAvailability(
  place: BenchPlace,
  pool: ContentionPool,
  writers: number,
  reads: number,
): Promise<AvailabilityResult> {
  const ownership = fileOwnership({ stateHome: pool.stateHome });
  const root = place.workspace();
  const lease = await ownership.acquire(root, CONFIG, { boundEndpoint: boundEndpoint() });
  const { epoch } = lease.owner;
  await lease.release();
  const before = await ownership.inspect(root);
  if (answerOf(before, epoch) !== 'stopped')
    throw new Error(`availability: the quiet workspace reads ${before.status} before the churn`);

  const answers = new Map<string, number>();
  const wrongReasons = new Set<string>();
  const times: number[] = [];
  const churn = await pool.churn(writers);
  let counts;
  try {
    for (let read = 0; read < reads; read += 1) {
      const start = now();
      const inspection = await ownership.inspect(root);
      times.push(elapsed(start));
      const answer = answerOf(inspection, epoch);
      answers.set(answer, (answers.get(answer) ?? 0) + 1);
      if (answer !== 'stopped' && wrongReasons.size < 3)
        wrongReasons.add('reason' in inspection ? inspection.reason : answer);
    }
  } finally {
    counts = await churn.stop();
  }
  return {
    writers,
    reads,
    stopped: answers.get('stopped') ?? 0,
    answers: Object.fromEntries([...answers].sort(([a], [b]) => a.localeCompare(b))),
    wrongReasons: [...wrongReasons],
    inspect: summarize(times),
    cycles: counts.reduce((sum, count) => sum + count.cycles, 0),
    busy: counts.reduce((sum, count) => sum + count.busy, 0),
    failed: counts.reduce((sum, count) => sum + count.failed, 0),
    churnMs: Math.max(...counts.map((count) => count.milliseconds)),
  };
}
