import { realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { ContractError, absolutePath, sha256 } from '@leasehold/contracts';
import { stateHomeLayout, type StateHomeLayout } from '@leasehold/registry';

/** The only names allowed in a workspace's private root. */
export const PRIVATE_ROOT_ENTRIES = ['checkout.lock', 'service'] as const;

/** The name of a workspace's private root folder: the first 32 hex digits of the SHA-256 of its root. */
export const PRIVATE_ROOT_NAME = /^[0-9a-f]{32}$/;
/** The only names allowed in a service folder; the last three belong to the service and are never read. */
export const SERVICE_ENTRIES = [
  'format.json',
  'config.json',
  'host-config.json',
  'registration.json',
  'owner.lock',
  'local-capability.json',
  'companion.json',
  'access-config.json',
  'access.json',
  'history',
] as const;

/**
 * Every path Leasehold uses for one workspace in one state home: the state
 * home's shared layout (from the registry) and the workspace's own files.
 */
export interface WorkspacePlaces extends StateHomeLayout {
  readonly root: string;
  readonly privateRoot: string;
  readonly checkoutLock: string;
  readonly service: string;
  readonly format: string;
  readonly config: string;
  readonly hostConfig: string;
  readonly registration: string;
  readonly ownerLock: string;
  readonly capability: string;
  readonly companion: string;
}

/**
 * The places of `root` (absolute, normalised) under `stateHome`.
 * @throws ContractError `refused` for a root or state home that is not absolute and normalised.
 */
export function workspacePlaces(root: string, stateHome: string): WorkspacePlaces {
  checkedPath(root, 'workspace root');
  const layout = stateHomeLayout(stateHome);
  const privateRoot = join(layout.workspaces, sha256(new TextEncoder().encode(root)).slice(0, 32));
  const service = join(privateRoot, 'service');
  return {
    ...layout,
    root,
    privateRoot,
    checkoutLock: join(privateRoot, 'checkout.lock'),
    service,
    format: join(service, 'format.json'),
    config: join(service, 'config.json'),
    hostConfig: join(service, 'host-config.json'),
    registration: join(service, 'registration.json'),
    ownerLock: join(service, 'owner.lock'),
    capability: join(service, 'local-capability.json'),
    companion: join(service, 'companion.json'),
  };
}

function checkedPath(path: string, label: string): string {
  if (!absolutePath.safeParse(path).success) throw new ContractError('refused', `${label}: not an absolute, normalised path`);
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
    throw workspaceRefusal(path, `not an existing folder (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`, error);
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
