import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { ContractError, absolutePath, placeOptions, shellQuote } from '@leasehold/contracts';
import { defaultStateHome, resolveWorkspace } from '@leasehold/state-home';
import type { Output, Streams } from './output.js';
import { permissionErrno } from './access.js';
import { SetupError, type Where } from './remedies.js';

/** What every command receives. */
export interface CommandContext {
  readonly output: Output;
  readonly streams: Streams & { readonly stdin: NodeJS.ReadableStream & { isTTY?: boolean } };
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  /** The parsed options of the command (common ones included). */
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  /** `run`'s program and its arguments: everything after `--`, never parsed. */
  readonly program?: readonly string[];
  /**
   * The command's own entry file (`dist/leasehold.cjs`): what its own helper processes start, the
   * file-system check's racing workers, whoever called `main` (a program that embeds the command is
   * never started again by it).
   */
  readonly command: string;
}

/**
 * The state home: `--state-home`, else `LEASEHOLD_STATE_HOME`, else
 * `$XDG_STATE_HOME/leasehold`, else `~/.local/state/leasehold`. It need not
 * exist: readers find it empty, writers create it with its parents.
 */
export function stateHomeOf(context: CommandContext): string {
  const given = context.values['state-home'];
  if (typeof given !== 'string') return defaultStateHomeOf(context.env);
  const path = resolve(context.cwd, given);
  if (!absolutePath.safeParse(path).success) {
    throw new SetupError(
      '--state-home: not a usable path',
      'pass --state-home a folder path (absolute, or relative to the current folder)',
    );
  }
  return path;
}

function defaultStateHomeOf(env: NodeJS.ProcessEnv): string {
  try {
    return defaultStateHome(env);
  } catch (error) {
    if (!ContractError.is(error, 'refused')) throw error;
    throw new SetupError(
      error.message,
      'set LEASEHOLD_STATE_HOME to an absolute path (or unset it), or pass --state-home DIR',
      { cause: error },
    );
  }
}

/**
 * The workspace root: the realpath of `--workspace` (default: the current
 * folder). With `mayBeGone`, a folder that no longer exists is named as
 * given, so a deleted workspace that is still registered can be inspected
 * and recovered.
 */
export function workspaceOf(context: CommandContext, mayBeGone = false): string {
  const given = context.values.workspace;
  const path = resolve(context.cwd, typeof given === 'string' ? given : '.');
  try {
    return resolveWorkspace(path);
  } catch (error) {
    if (!ContractError.is(error, 'refused')) throw error;
    // A folder this user may not see is no missing folder: say so, whatever the command.
    const denied = permissionErrno(error.cause);
    if (denied !== undefined) {
      throw new SetupError(
        `${path}: permission denied (${denied}): this user may not see that folder`,
        'run leasehold as a user who may read the workspace, or give this user access to it',
        { path, cause: error },
      );
    }
    if (mayBeGone && absolutePath.safeParse(path).success) return path;
    throw new SetupError(
      error.message,
      'pass an existing folder with --workspace (default: the current folder), or create it first',
      { path, cause: error },
    );
  }
}

/**
 * Where a failed command was about, for the commands its remedy suggests: its workspace and state
 * home when the command line tells them (a command without `--workspace` for one that takes none).
 */
export function whereOf(context: CommandContext, takesWorkspace: boolean): Where {
  const quietly = <T>(read: () => T): T | undefined => {
    try {
      return read();
    } catch {
      return undefined; // that is what failed: the remedy then names no place
    }
  };
  const stateHome = quietly(() => stateHomeOf(context));
  const root = takesWorkspace ? quietly(() => workspaceOf(context, true)) : undefined;
  const home = stateHome === undefined ? '' : ` --state-home ${shellQuote(stateHome)}`;
  return { place: root === undefined || stateHome === undefined ? '' : ` ${placeOptions(root, stateHome)}`, home };
}

/**
 * Refuses a folder asked about that is not an existing folder and that the state home knows
 * nothing of (`inspection` absent): a mistyped path, never a workspace. A registered folder that
 * was deleted still answers, so it can be inspected and recovered.
 * @throws SetupError (`refused`, exit 1) naming the path.
 */
export function refuseUnknownFolder(folder: string, inspection: { readonly status: string }): void {
  if (inspection.status !== 'absent' || statSync(folder, { throwIfNoEntry: false })?.isDirectory() === true) return;
  throw new SetupError(
    `${folder}: not an existing folder, and the state home names no workspace there`,
    'pass an existing folder with --workspace (default: the current folder): check the path',
    { path: folder },
  );
}
