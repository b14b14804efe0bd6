/** Messages between the benchmark and its contention workers (item 6 of issue #6). */

/** Parent to worker: run one acquire + release now, or leave. */
export type WorkerCommand = { readonly type: 'go' } | { readonly type: 'exit' };

/** Worker to parent: loaded and waiting, or one cycle done with its outcome. */
export type WorkerReport =
  | { readonly type: 'ready' }
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
