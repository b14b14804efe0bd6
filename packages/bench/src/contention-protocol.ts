/** Messages between the benchmark and its workers: section 6's contention workers, section 11's hand-over pair. */

/**
 * Parent to worker: run one acquire + release now (`go`); cycle acquire +
 * release without pause until told to stop (`churn`, `stop-churn`); or leave.
 */
export type WorkerCommand =
  | { readonly type: 'go' }
  | { readonly type: 'churn' }
  | { readonly type: 'stop-churn' }
  | { readonly type: 'exit' }
  | HandoverCommand;

/**
 * Parent to a hand-over worker (section 11): take the workspace now (`hold`), or wait for it
 * (`wait`), through Leasehold or, `bare`, by an exclusive create of a plain file; let go of what
 * it holds (`release`).
 */
type HandoverCommand =
  | { readonly type: 'hold'; readonly bare: boolean }
  | { readonly type: 'wait'; readonly bare: boolean }
  | { readonly type: 'release' };

/**
 * A hand-over worker to parent: it holds; its wait has begun; it let go, or it took what it
 * waited for (and let go of it again), `at` a `process.hrtime.bigint()` reading as a decimal
 * string (CLOCK_MONOTONIC, the same in every process), taken as soon as the release or the
 * acquire returned.
 */
type HandoverReport =
  | { readonly type: 'held' }
  | { readonly type: 'waiting' }
  | { readonly type: 'released'; readonly at: string }
  | { readonly type: 'acquired'; readonly at: string };

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
  | HandoverReport
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

/**
 * Command-line arguments of one kind of worker, by name in `names`' order:
 * `argv` writes them, `parse` reads them back from `argv` (without node and the script).
 */
function argumentsOf<Name extends string>(worker: string, names: readonly Name[]) {
  return {
    argv: (options: Readonly<Record<Name, string>>): string[] => names.map((name) => options[name]),
    parse: (argv: readonly string[]): Record<Name, string> => {
      if (argv.length < names.length)
        throw new Error(`${worker}: expected ${names.map((name) => `<${name}>`).join(' ')}`);
      return Object.fromEntries(names.map((name, index) => [name, argv[index]!])) as Record<Name, string>;
    },
  };
}

/** The arguments a worker is started with, in order. */
export interface WorkerArguments {
  readonly stateHome: string;
  readonly workspace: string;
  readonly endpoint: string;
}

const workerArguments = argumentsOf<keyof WorkerArguments>('contention worker', ['stateHome', 'workspace', 'endpoint']);

/** `WorkerArguments` as command-line arguments. */
export const workerArgv: (options: WorkerArguments) => string[] = workerArguments.argv;

/** Reads `WorkerArguments` back from `argv` (without node and the script). */
export const parseWorkerArgv: (argv: readonly string[]) => WorkerArguments = workerArguments.parse;

/** The arguments a bare floor worker (`bare-contention-worker.js`) is started with, in order. */
export interface BareWorkerArguments {
  /** The worker's own folder: its staging folder and the files of its publications are made in it. */
  readonly folder: string;
  /** The folder of the one table and lock every bare worker shares. */
  readonly shared: string;
  /** The publications of one cycle, in order: `FsyncCount.sequence`'s tokens. */
  readonly sequence: string;
}

const bareWorkerArguments = argumentsOf<keyof BareWorkerArguments>('bare contention worker', [
  'folder',
  'shared',
  'sequence',
]);

/** `BareWorkerArguments` as command-line arguments. */
export const bareWorkerArgv: (options: BareWorkerArguments) => string[] = bareWorkerArguments.argv;

/** Reads `BareWorkerArguments` back from `argv` (without node and the script). */
export const parseBareWorkerArgv: (argv: readonly string[]) => BareWorkerArguments = bareWorkerArguments.parse;

/** The arguments a hand-over worker (`handover-worker.js`) is started with, in order. */
export interface HandoverWorkerArguments extends WorkerArguments {
  /** The plain file the bare pair takes by an exclusive create. */
  readonly bareLock: string;
}

const handoverWorkerArguments = argumentsOf<keyof HandoverWorkerArguments>('hand-over worker', [
  'stateHome',
  'workspace',
  'endpoint',
  'bareLock',
]);

/** `HandoverWorkerArguments` as command-line arguments. */
export const handoverWorkerArgv: (options: HandoverWorkerArguments) => string[] = handoverWorkerArguments.argv;

/** Reads `HandoverWorkerArguments` back from `argv` (without node and the script). */
export const parseHandoverWorkerArgv: (argv: readonly string[]) => HandoverWorkerArguments =
  handoverWorkerArguments.parse;
