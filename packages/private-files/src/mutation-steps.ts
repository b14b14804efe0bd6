/** The public operation a mutating step belongs to. */
export type MutationOperation =
  'directory' | 'create' | 'create-folder' | 'replace' | 'remove' | 'remove-folder' | 'sweep-staging';

/** The mutating system call about to run. */
export type MutationAction =
  'mkdir' | 'chmod' | 'write' | 'fsync' | 'link' | 'rename' | 'unlink' | 'rmdir' | 'fsync-directory';

/** What `beforeMutation` is told: the call about to run, and the path it touches. */
export interface MutationStep {
  readonly operation: MutationOperation;
  readonly action: MutationAction;
  readonly path: string;
  /** For a `link` or a `rename`: the path linked or renamed from (`path` is where it goes). */
  readonly source?: string;
  /** For a `write`: the exact bytes about to be written to `path` (the caller's array, not a copy). */
  readonly bytes?: Uint8Array;
  /**
   * For a `mkdir` or the `write` that makes a file: its permission bits, when they are not a private
   * file's 0600 or a private folder's 0700 (a folder's mark is readable by everyone).
   */
  readonly mode?: number;
}

/** What a step carries beyond its operation, action and path. */
type StepDetail = Pick<MutationStep, 'source' | 'bytes' | 'mode'>;

/** Test seam: called before every mutating system call. Production code passes nothing. */
export interface PrivateFilesHooks {
  beforeMutation?(step: MutationStep): void;
}

/** Tells the test seam of one mutating step, right before its system call runs. */
export type StepReporter = (
  operation: MutationOperation,
  action: MutationAction,
  path: string,
  detail?: StepDetail,
) => void;

/** The reporter of every step to `hooks` (a no-op without them). */
export function stepReporter(hooks: PrivateFilesHooks | undefined): StepReporter {
  return (operation, action, path, detail = {}) => {
    hooks?.beforeMutation?.({ operation, action, path, ...detail });
  };
}
