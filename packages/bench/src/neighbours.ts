import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { workspacePlaces } from '@leasehold/contracts';
import { fileOwnership } from '@leasehold/coordination';
import { handoverWorkerArgv } from './contention-protocol.js';
import { command, forkWorker, nextOf, stopWorkers, type Worker } from './contention.js';
import { CONFIG, boundEndpoint, type BenchPlace } from './fixtures.js';
import { runInterleaved, type Operation, type RunPlan } from './harness.js';

// Section 11, the owner's neighbours: what a watch of an idle workspace costs a watcher. It reads
// on each notification and on every poll; with nothing changing, only the polls run, so its cost
// is the poll's. The floor is a bare poll of the same files in the same process: the registration
// read and the folders' stats, with no check and no decode.

/** What watching an idle workspace cost, against a bare poll of its files. */
export interface IdleWatchResult {
  /** The poll interval the measure ran at, in milliseconds (faster than the default, to count enough reads). */
  readonly pollMs: number;
  /** How long each of the three spans ran, in milliseconds. */
  readonly spanMs: number;
  /**
   * CPU (user + system) a watch adds per minute at the default 1 s poll: what it added over the
   * span, beyond the process doing nothing, per read, times 60 reads.
   */
  readonly watchCpuPerMinuteMs: number;
  /** The same for a bare poll: `statSync` of the folders and `readFileSync` of the registration. */
  readonly barePollCpuPerMinuteMs: number;
  /** `watchCpuPerMinuteMs / barePollCpuPerMinuteMs`; null when the bare poll cost nothing measurable beyond the idle process. */
  readonly ratio: number | null;
}

const MEASURED_POLL_MS = 50;
const DEFAULT_POLL_MS = 1000;

/** CPU milliseconds (user + system) this process spends while `run` runs for `spanMs`. */
async function cpuOver(spanMs: number, run: (signal: AbortSignal) => Promise<void>): Promise<number> {
  const stop = new AbortController();
  const before = process.cpuUsage();
  const running = run(stop.signal);
  await new Promise((resolve) => setTimeout(resolve, spanMs));
  stop.abort();
  await running;
  const { user, system } = process.cpuUsage(before);
  return (user + system) / 1000;
}

/** CPU per minute at the default poll of a poll that added `addedMs` over `spanMs` at `MEASURED_POLL_MS`. */
function perMinuteAtDefault(addedMs: number, spanMs: number): number {
  const perRead = addedMs / (spanMs / MEASURED_POLL_MS);
  return perRead * (60_000 / DEFAULT_POLL_MS);
}

/**
 * A workspace held by an owner of this process that changes nothing, watched for `spanMs` at a
 * 50 ms poll; a bare poll of the same files for as long; and this process doing nothing for as
 * long, which each of the other two is measured beyond. Each is given as CPU per minute at the
 * default 1 s poll.
 */
export async function measureIdleWatch(place: BenchPlace, spanMs: number): Promise<IdleWatchResult> {
  const stateHome = place.folder(place.unique('neighbours-state'));
  const ownership = fileOwnership({ stateHome });
  const root = place.workspace();
  const lease = await ownership.acquire(root, CONFIG, { boundEndpoint: boundEndpoint() });
  try {
    const places = workspacePlaces(root, stateHome);
    const idle = await cpuOver(spanMs, async (signal) => {
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    });
    const watch = await cpuOver(spanMs, async (signal) => {
      for await (const snapshot of ownership.watch(root, { signal, pollMs: MEASURED_POLL_MS })) void snapshot;
    });
    const bare = await cpuOver(spanMs, async (signal) => {
      const poll = setInterval(() => {
        for (const folder of [places.registry, places.privateRoot, places.service]) statSync(folder);
        readFileSync(places.registration);
      }, MEASURED_POLL_MS);
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      clearInterval(poll);
    });
    const watchCpuPerMinuteMs = perMinuteAtDefault(Math.max(0, watch - idle), spanMs);
    const barePollCpuPerMinuteMs = perMinuteAtDefault(Math.max(0, bare - idle), spanMs);
    return {
      pollMs: MEASURED_POLL_MS,
      spanMs,
      watchCpuPerMinuteMs,
      barePollCpuPerMinuteMs,
      ratio: barePollCpuPerMinuteMs > 0 ? watchCpuPerMinuteMs / barePollCpuPerMinuteMs : null,
    };
  } finally {
    await lease.release();
  }
}

// Section 11's second row: how long a waiter waits once the owner has let go. Two processes, an
// owner and a waiter; the waiter waits in line through Leasehold (woken by a notification of the
// workspace's folders, or looking again after 250 ms), or, for the floor, tries an exclusive create
// of a plain file every 250 ms. The delay runs from the owner's release returning to the waiter's
// acquire returning, on the system-wide monotonic clock both processes read.

const HANDOVER_WORKER = fileURLToPath(new URL('./handover-worker.js', import.meta.url));
const LOOK_AGAIN_MS = 250;
/** Spreads the moments of release over the bare poll's interval (the golden ratio's fractional part). */
const SPREAD = (Math.sqrt(5) - 1) / 2;

/**
 * One hand-over, from the owner's release to the waiter's acquire, in milliseconds. The owner lets
 * go at a moment spread over the poll interval after the waiter's wait began (the same moments for
 * both kinds of waiter, sample by sample), as a release comes at any point of a poll.
 */
function handover(id: string, label: string, bare: boolean, owner: Worker, waiter: Worker): Operation {
  let samples = 0;
  return {
    id,
    label,
    async sample() {
      command(owner, { type: 'hold', bare });
      await nextOf(owner, 'held');
      command(waiter, { type: 'wait', bare });
      await nextOf(waiter, 'waiting');
      await sleep(((samples * SPREAD) % 1) * LOOK_AGAIN_MS);
      samples += 1;
      command(owner, { type: 'release' });
      const released = await nextOf(owner, 'released');
      const acquired = await nextOf(waiter, 'acquired');
      return Number(BigInt(acquired.at) - BigInt(released.at)) / 1e6;
    },
  };
}

/** The hand-over series by id, and what each measures. */
interface HandoverSeries {
  readonly series: Map<string, number[]>;
  readonly labels: ReadonlyMap<string, string>;
}

/**
 * The series `handover.waiter` (a waiting acquire) and `handover.bare-poll` (its bare floor), one
 * sample each per round, in rotating order, from an owner process to a waiter process.
 */
export async function measureHandover(place: BenchPlace, plan: RunPlan): Promise<HandoverSeries> {
  const argv = {
    stateHome: place.folder(place.unique('handover-state')),
    workspace: place.workspace(),
    bareLock: join(place.folder(place.unique('handover-bare')), 'bare.lock'),
  };
  const [owner, waiter] = [0, 1].map(() =>
    forkWorker(HANDOVER_WORKER, handoverWorkerArgv({ ...argv, endpoint: boundEndpoint() })),
  ) as [Worker, Worker];
  try {
    await Promise.all([nextOf(owner, 'ready'), nextOf(waiter, 'ready')]);
    const operations = [
      handover('handover.waiter', "a waiting acquire, from its owner's release to its acquire", false, owner, waiter),
      handover(
        'handover.bare-poll',
        "bare poll: open 'wx' every 250 ms, from the owner's unlink to its create",
        true,
        owner,
        waiter,
      ),
    ];
    const series = await runInterleaved(operations, plan);
    return { series, labels: new Map(operations.map((operation) => [operation.id, operation.label])) };
  } finally {
    await stopWorkers([owner, waiter]);
  }
}
