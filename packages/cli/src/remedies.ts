import { constants as osConstants } from 'node:os';
import { ContractError, type ContractErrorCode, type ContractErrorOptions } from '@leasehold/contracts';
import { isSystemError } from '@leasehold/state-home';

/**
 * The options a suggested command needs to be about the same workspace and state home as the
 * command that failed: ` --workspace W --state-home S` (`place`) and ` --state-home S` (`home`),
 * each empty when the command line could not tell it.
 */
export interface Where {
  readonly place: string;
  readonly home: string;
}

const NOWHERE: Where = { place: '', home: '' };

/**
 * One line a person can act on, for each error code, naming commands that work where the error was
 * met: for an error whose layer set no `remedy` of its own (the layers set one wherever they know the fix).
 */
const REMEDIES: Record<ContractErrorCode, (at: Where) => string> = {
  refused: (at) =>
    `a file or an input breaks a rule (the message names it); for a file in the state home, \`leasehold doctor${at.home}\` shows how to fix it`,
  conflict: (at) =>
    `another owner, config or a newer state is in the way; see which with \`leasehold status${at.place}\` and \`leasehold list${at.home}\``,
  capacity: (at) => `the registry is full; stop or recover unused workspaces (\`leasehold list --all${at.home}\`)`,
  quarantine: (at) =>
    `an owner that is gone, or cannot be told from here, blocks this; check \`leasehold status${at.place}\`, then \`leasehold recover${at.place}\` once it is gone`,
  unavailable: (at) => `nothing answers there right now; see why with \`leasehold status${at.place}\``,
  'consumed-grant': (at) =>
    `this recovery was already used; run \`leasehold recover${at.place}\` again to review the current state`,
  busy: () => 'another leasehold command holds the registry; try again in a moment',
};

/** A ContractError the command makes, with the remedy that fits the state it was found in. */
export class RemedyError extends ContractError {
  declare readonly remedy: string;

  constructor(
    code: ContractErrorCode,
    message: string,
    remedy: string,
    options?: Omit<ContractErrorOptions, 'remedy'>,
  ) {
    super(code, message, { ...options, remedy });
  }
}

/**
 * A `refused` about what the command line names (a workspace folder that is
 * not there, an unusable state home): its own remedy fits it better than the
 * code's, which points at `leasehold doctor`.
 */
export class SetupError extends RemedyError {
  constructor(message: string, remedy: string, options?: ContractErrorOptions) {
    super('refused', message, remedy, options);
  }
}

/**
 * A mistake in the command line itself (a bad value, an option this state
 * home's backend does not take): exit 2 with `remedy`, found before anything
 * is opened or changed.
 */
export class UsageError extends Error {
  readonly remedy: string;

  constructor(message: string, remedy: string) {
    super(message);
    this.name = 'UsageError';
    this.remedy = remedy;
  }
}

/** What a failure that reached the command is, for a person or a script: never a bare errno. */
export interface Problem {
  readonly code: string;
  readonly message: string;
  readonly path?: string;
  readonly remedy?: string;
}

/** The remedies of the system errors a command line can run into (a path missing, a file in the way, no permission). */
const SYSTEM_REMEDIES: Readonly<Record<string, string>> = {
  ENOENT:
    'that path does not exist: check --workspace and --state-home (or LEASEHOLD_STATE_HOME), or create the folder',
  ENOTDIR: 'a file stands where a folder must be: check --workspace and --state-home, or move that file away',
  EEXIST: 'a file stands where a folder must be: check --state-home, or move that file away',
  EACCES: 'permission denied: run as the user who owns that path, or pass a --state-home of your own',
  EPERM: 'permission denied: run as the user who owns that path, or pass a --state-home of your own',
};

/**
 * The remedy of a Leasehold error: the one the layer that threw it set (the same words a daemon
 * that prints the error prints), else its code's.
 */
function remedyOf(error: ContractError, at: Where): string {
  return error.remedy ?? REMEDIES[error.code](at);
}

/** The code, message, path and remedy of `error`, whatever threw it; `at`, where the command was about. */
export function problemOf(error: unknown, at: Where = NOWHERE): Problem {
  if (ContractError.is(error)) {
    const remedy = remedyOf(error, at);
    return {
      code: error.code,
      message: error.message,
      ...(error.path === undefined ? {} : { path: error.path }),
      remedy,
    };
  }
  if (!isSystemError(error))
    return { code: 'internal', message: error instanceof Error ? error.message : 'unexpected failure' };
  const { code, syscall, path } = error;
  // Node's message repeats the code and the path; say what happened to which path once.
  const bare = error.message.startsWith(`${code}: `) ? error.message.slice(code.length + 2) : error.message;
  const what = bare.replace(/, \w+ '.*'$/, '');
  const message = path === undefined ? what : `${path}: ${what}${syscall === undefined ? '' : ` (${syscall})`}`;
  const remedy = SYSTEM_REMEDIES[code];
  return { code, message, ...(path === undefined ? {} : { path }), ...(remedy === undefined ? {} : { remedy }) };
}

/**
 * The stop signal that ended a wait, when `error` is that end (a `serveOwner` stopped while it
 * waited for the workspace carries its outcome as the cause); undefined for any other error.
 */
export function interruptingSignal(error: unknown): NodeJS.Signals | undefined {
  if (!ContractError.is(error)) return undefined;
  const cause = (error as { cause?: unknown }).cause as { reason?: unknown; signal?: unknown } | undefined;
  return cause?.reason === 'signal' && typeof cause.signal === 'string' ? (cause.signal as NodeJS.Signals) : undefined;
}

/** The exit status a shell gives a program a signal ended: 128 plus its number (130 for SIGINT). */
export function signalExit(signal: NodeJS.Signals): number {
  return 128 + (osConstants.signals[signal] ?? 0);
}
