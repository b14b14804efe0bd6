/** Messages between the benchmark and its contention workers (section 6, contention). */

/**
 * Parent to worker: run one acquire + release now (`go`); cycle acquire +
 * release without pause until told to stop (`churn`, `stop-churn`); or leave.
 */
export type WorkerCommand =
  | { readonly type: 'go' }
  | { readonly type: 'churn' }
  | { readonly type: 'stop-churn' }
  | { readonly type: 'exit' };

/** What one worker's churn did, from `churn` to `stop-churn`. */
export interface ChurnCounts {
  /** Acquire + release cycles finished. */
  readonly cycles: number;
  /** Cycles that met `busy`, in acquire or in release (a release is retried until it succeeds). */
  readonly busy: number;
  /** Cycles that failed otherwise (another ContractError code, or an error). */
  readonly failed: number;
  /** Milliseconds from `churn` to the end of the last cycle. */
  readonly milliseconds: number;
}

/**
 * Worker to parent: loaded and waiting; one cycle done with its outcome; the
 * first churn cycle done (the churn is under way); or the churn stopped.
 */
export type WorkerReport =
  | { readonly type: 'ready' }
  | { readonly type: 'churning' }
  | ({ readonly type: 'churned' } & ChurnCounts)
  | {
      readonly type: 'done';
      /**
       * `ok`; `busy` when the lock wait ran out in acquire or in release (a release is retried until
       * it succeeds, so the next cycle starts clean); another ContractError code; or `error`.
       */
      readonly outcome: string;
      /** The cycle as the worker timed it, in milliseconds. */
      readonly milliseconds: number;
      /**
       * When this worker held the registry lock during the cycle: [linked, unlinked] pairs of
       * `process.hrtime.bigint()` readings as decimal strings (CLOCK_MONOTONIC, the same in every process).
       */
      readonly held: readonly (readonly [string, string])[];
    };

/** The arguments a worker is started with, in order. */
export interface WorkerArguments {
  readonly stateHome: string;
  readonly workspace: string;
  readonly endpoint: string;
}

/** `WorkerArguments` as command-line arguments. */
export function workerArgv(options: WorkerArguments): string[] {
  return [options.stateHome, options.workspace, options.endpoint];
}

/** Reads `WorkerArguments` back from `argv` (without node and the script). */
export function parseWorkerArgv(argv: readonly string[]): WorkerArguments {
  const [stateHome, workspace, endpoint] = argv;
  if (stateHome === undefined || workspace === undefined || endpoint === undefined) {
    throw new Error('contention worker: expected <stateHome> <workspace> <endpoint>');
  }
  return { stateHome, workspace, endpoint };
}
