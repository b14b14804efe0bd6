import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  bareWorkerArgv,
  workerArgv,
  type ChurnCounts,
  type WorkerCommand,
  type WorkerReport,
} from './contention-protocol.js';
import { boundEndpoint, type BenchPlace } from './fixtures.js';
import { elapsed, now } from './harness.js';

const WORKER = fileURLToPath(new URL('./contention-worker.js', import.meta.url));
const BARE_WORKER = fileURLToPath(new URL('./bare-contention-worker.js', import.meta.url));

/** One contention trial: the concurrent wall time and the serial sum, in milliseconds. */
export interface ContentionTrial {
  /** From `go` to all 16 at once, to the last `done`. */
  readonly wall: number;
  /** The same workers one at a time: 16 uncontended cycles, each from `go` to `done`. */
  readonly serial: number;
  /** Each worker's outcome in the concurrent pass: `ok`, `busy`, another ContractError code, or `error`. */
  readonly outcomes: readonly string[];
  /** How long the registry lock was held, summed over the concurrent pass's transactions, in milliseconds. */
  readonly lockHeld: number;
  /** Each of the concurrent pass's transactions' hold of the lock, in milliseconds. */
  readonly lockHolds: readonly number[];
  /** The same for the serial pass. */
  readonly serialLockHeld: number;
  readonly serialLockHolds: readonly number[];
  /** Registry transactions in the concurrent pass (two per cycle: acquire and release). */
  readonly transactions: number;
}

/** Milliseconds of lock holding in `reports`: in all, and each transaction's. */
function heldMilliseconds(reports: readonly Extract<WorkerReport, { type: 'done' }>[]): {
  milliseconds: number;
  holds: number[];
} {
  const holds = reports
    .flatMap((report) => report.held)
    .map(([linked, unlinked]) => Number(BigInt(unlinked) - BigInt(linked)) / 1e6);
  return { milliseconds: holds.reduce((sum, hold) => sum + hold, 0), holds };
}

interface Waiting {
  resolve(report: WorkerReport): void;
  reject(error: Error): void;
}

/** A worker process and the reports it sent that nobody has taken yet. */
export interface Worker {
  readonly process: ChildProcess;
  readonly reports: WorkerReport[];
  waiting: Waiting | undefined;
  exited: Error | undefined;
}

function nextReport(worker: Worker): Promise<WorkerReport> {
  const queued = worker.reports.shift();
  if (queued !== undefined) return Promise.resolve(queued);
  if (worker.exited !== undefined) return Promise.reject(worker.exited);
  return new Promise((resolve, reject) => {
    worker.waiting = { resolve, reject };
  });
}

async function nextDone(worker: Worker): Promise<Extract<WorkerReport, { type: 'done' }>> {
  const report = await nextReport(worker);
  if (report.type !== 'done') throw new Error(`contention worker: expected done, got ${report.type}`);
  return report;
}

/** The worker's next report, which must be a `type`. */
export async function nextOf<T extends WorkerReport['type']>(
  worker: Worker,
  type: T,
): Promise<Extract<WorkerReport, { type: T }>> {
  const report = await nextReport(worker);
  if (report.type !== type) throw new Error(`worker: expected ${type}, got ${report.type}`);
  return report as Extract<WorkerReport, { type: T }>;
}

/** Forks `script` with `argv` as a worker: its reports queue until taken by `nextOf`. */
export function forkWorker(script: string, argv: readonly string[]): Worker {
  const child = fork(script, argv, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const worker: Worker = { process: child, reports: [], waiting: undefined, exited: undefined };
  child.on('message', (report: WorkerReport) => {
    const waiting = worker.waiting;
    worker.waiting = undefined;
    if (waiting === undefined) worker.reports.push(report);
    else waiting.resolve(report);
  });
  child.on('exit', (code, signal) => {
    worker.exited = new Error(`worker ${child.pid} exited (${signal ?? code})`);
    const waiting = worker.waiting;
    worker.waiting = undefined;
    waiting?.reject(worker.exited);
  });
  return worker;
}

/** Tells each worker to leave (kills one that cannot hear it) and waits until all have exited. */
export async function stopWorkers(workers: readonly Worker[]): Promise<void> {
  await Promise.all(
    workers.map(
      (worker) =>
        new Promise<void>((resolve) => {
          if (worker.process.exitCode !== null || worker.process.signalCode !== null) return resolve();
          worker.process.once('exit', () => resolve());
          if (worker.process.connected) command(worker, { type: 'exit' });
          else worker.process.kill('SIGKILL');
        }),
    ),
  );
}

/** A churn under way: `stop` ends it and answers each worker's counts. */
export interface Churn {
  stop(): Promise<ChurnCounts[]>;
}

/** Sends `message` to the worker. */
export function command(worker: Worker, message: WorkerCommand): void {
  worker.process.send(message);
}

/**
 * N worker processes, each owning a distinct workspace root in one shared
 * state home with the default lock wait, warmed up and waiting for `go`.
 */
export class ContentionPool {
  readonly #workers: Worker[];
  /** The state home every worker's workspace is in (the bare pool's: the folder of its shared table). */
  readonly stateHome: string;

  private constructor(workers: Worker[], stateHome: string) {
    this.#workers = workers;
    this.stateHome = stateHome;
  }

  /**
   * Starts `count` workers, waits until every one has loaded, then warms them
   * up with `warmupPasses` untimed serial passes (the first makes each workspace).
   */
  static async start(place: BenchPlace, count: number, warmupPasses: number): Promise<ContentionPool> {
    const stateHome = join(place.root, 'state-contention');
    const argvs = Array.from({ length: count }, () =>
      workerArgv({ stateHome, workspace: place.workspace(), endpoint: boundEndpoint() }),
    );
    return ContentionPool.#start(WORKER, argvs, stateHome, warmupPasses);
  }

  /**
   * The bare floor of the same pool: `count` workers that each replay
   * `sequence` (a cycle's publications) with plain node:fs in a folder of
   * their own, on one shared table and lock; warmed up the same way.
   */
  static async startBare(
    place: BenchPlace,
    count: number,
    warmupPasses: number,
    sequence: string,
  ): Promise<ContentionPool> {
    const shared = place.folder('bare-contention', 'shared');
    const argvs = Array.from({ length: count }, (_, index) =>
      bareWorkerArgv({ folder: place.folder('bare-contention', `worker-${index}`), shared, sequence }),
    );
    return ContentionPool.#start(BARE_WORKER, argvs, shared, warmupPasses);
  }

  static async #start(
    script: string,
    argvs: readonly string[][],
    stateHome: string,
    warmupPasses: number,
  ): Promise<ContentionPool> {
    const workers = argvs.map((argv) => forkWorker(script, argv));
    const pool = new ContentionPool(workers, stateHome);
    try {
      for (const worker of workers) await nextOf(worker, 'ready');
      for (let pass = 0; pass < warmupPasses; pass += 1) await pool.#serial();
    } catch (error) {
      await pool.stop();
      throw error;
    }
    return pool;
  }

  /** Serial pass and concurrent pass, in the order given (alternate it between trials). */
  async trial(serialFirst: boolean): Promise<ContentionTrial> {
    const serial = serialFirst ? await this.#serial() : undefined;
    const concurrent = await this.#concurrent();
    const { total, lockHeld, lockHolds } = serial ?? (await this.#serial());
    return { ...concurrent, serial: total, serialLockHeld: lockHeld, serialLockHolds: lockHolds };
  }

  /**
   * The first `count` workers cycle acquire + release without pause, each on
   * its own workspace; resolves once every one has finished a first cycle.
   */
  async churn(count: number): Promise<Churn> {
    const churners = this.#workers.slice(0, count);
    if (churners.length !== count)
      throw new Error(`contention pool: ${count} churners asked, ${this.#workers.length} workers`);
    for (const worker of churners) command(worker, { type: 'churn' });
    await Promise.all(churners.map((worker) => nextOf(worker, 'churning')));
    return {
      stop: async () => {
        for (const worker of churners) command(worker, { type: 'stop-churn' });
        return Promise.all(churners.map((worker) => nextOf(worker, 'churned')));
      },
    };
  }

  /** Tells every worker to leave and waits for them. */
  async stop(): Promise<void> {
    await stopWorkers(this.#workers);
  }

  async #serial(): Promise<{ total: number; lockHeld: number; lockHolds: number[] }> {
    let total = 0;
    const reports = [];
    for (const worker of this.#workers) {
      const start = now();
      command(worker, { type: 'go' });
      const done = await nextDone(worker);
      total += elapsed(start);
      if (done.outcome !== 'ok') throw new Error(`contention worker: an uncontended cycle answered ${done.outcome}`);
      reports.push(done);
    }
    const { milliseconds, holds } = heldMilliseconds(reports);
    return { total, lockHeld: milliseconds, lockHolds: holds };
  }

  async #concurrent(): Promise<{
    wall: number;
    outcomes: string[];
    lockHeld: number;
    lockHolds: number[];
    transactions: number;
  }> {
    const start = now();
    for (const worker of this.#workers) command(worker, { type: 'go' });
    const reports = await Promise.all(this.#workers.map((worker) => nextDone(worker)));
    const wall = elapsed(start);
    const { milliseconds, holds } = heldMilliseconds(reports);
    return {
      wall,
      outcomes: reports.map((report) => report.outcome),
      lockHeld: milliseconds,
      lockHolds: holds,
      transactions: holds.length,
    };
  }
}
