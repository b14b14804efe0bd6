import { resolve } from 'node:path';
import { ContractError, absolutePath } from '@leasehold/contracts';
import { defaultStateHome, resolveWorkspace } from '@leasehold/coordination';
import type { Output, Streams } from './output.js';

/** What every command receives. */
export interface CommandContext {
  readonly output: Output;
  readonly streams: Streams & { readonly stdin: NodeJS.ReadableStream & { isTTY?: boolean } };
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  /** The parsed options of the command (common ones included). */
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
}

/** The state home: `--state-home`, else the default of SPEC 5.1. */
export function stateHomeOf(context: CommandContext): string {
  const given = context.values['state-home'];
  if (typeof given !== 'string') return defaultStateHome(context.env);
  const path = resolve(context.cwd, given);
  if (!absolutePath.safeParse(path).success) throw new ContractError('refused', '--state-home: not a usable path');
  return path;
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
    if (mayBeGone && absolutePath.safeParse(path).success) return path;
    throw error;
  }
}

/** The options that name the same workspace and state home in a suggested command. */
export function placeOptions(root: string, stateHome: string): string {
  return `--workspace ${shellQuote(root)} --state-home ${shellQuote(stateHome)}`;
}

/** Quotes a path for a POSIX shell when it needs it. */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`;
}
