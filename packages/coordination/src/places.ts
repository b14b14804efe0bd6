import { realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { ContractError, absolutePath } from '@leasehold/contracts';

function checkedPath(path: string, label: string): string {
  if (!absolutePath.safeParse(path).success)
    throw new ContractError('refused', `${label}: not an absolute, normalised path`);
  return path;
}

/**
 * The real path of an existing folder: the one name a workspace is known by,
 * whatever links led to it.
 * @throws ContractError `refused`, naming `path`, when it is not an existing folder.
 */
export function resolveWorkspace(path: string): string {
  let real: string;
  let folder: boolean;
  try {
    real = realpathSync(path);
    folder = statSync(real).isDirectory();
  } catch (error) {
    throw workspaceRefusal(
      path,
      `not an existing folder (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`,
      error,
    );
  }
  if (!folder) throw workspaceRefusal(path, 'not a folder');
  return real;
}

function workspaceRefusal(path: string, why: string, cause?: unknown): ContractError {
  const options = { path: resolve(path), ...(cause === undefined ? {} : { cause }) };
  return new ContractError('refused', `${path}: ${why}; pass the path of an existing workspace folder`, options);
}

/**
 * The state home: `LEASEHOLD_STATE_HOME`, else `$XDG_STATE_HOME/leasehold`,
 * else `~/.local/state/leasehold`. A relative XDG_STATE_HOME is ignored, as
 * the XDG specification asks.
 * @throws ContractError `refused` when the result is not absolute and normalised.
 */
export function defaultStateHome(environment: NodeJS.ProcessEnv = process.env): string {
  const explicit = environment.LEASEHOLD_STATE_HOME;
  if (explicit !== undefined && explicit !== '') return checkedPath(explicit, 'LEASEHOLD_STATE_HOME');
  const xdg = environment.XDG_STATE_HOME;
  if (xdg !== undefined && xdg.startsWith('/')) return checkedPath(join(xdg, 'leasehold'), 'XDG_STATE_HOME');
  return checkedPath(join(homedir(), '.local', 'state', 'leasehold'), 'home folder');
}
