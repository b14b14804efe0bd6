import { basename, dirname, join } from 'node:path';
import { ContractError, absolutePath } from '@leasehold/contracts';
import { STAGING_FOLDER } from '@leasehold/private-files';

/** The namespace folder below a state home; every Leasehold file lives under it. */
export const NAMESPACE_FOLDER = 'v1';
/** The only names allowed in the namespace folder `<stateHome>/v1` (besides the staging folder). */
export const NAMESPACE_ENTRIES = ['registry', 'journal', 'workspaces'] as const;
/** A take-over marker in the registry folder: `takeover-<token of the lock or marker it takes over>.lock`. */
export const TAKEOVER_MARKER = /^takeover-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.lock$/;
/** The only names allowed in `<ns>/registry/`. */
export const REGISTRY_FOLDER_ENTRIES: readonly (string | RegExp)[] = ['format.json', 'roots.json', 'registry.lock', TAKEOVER_MARKER];

/** Every state-home-wide path: the one place that names the layout shared by all workspaces. */
export interface StateHomeLayout {
  readonly stateHome: string;
  readonly namespace: string;
  readonly staging: string;
  readonly registry: string;
  readonly registryFormat: string;
  readonly roots: string;
  readonly registryLock: string;
  readonly journal: string;
  readonly workspaces: string;
}

/**
 * The layout of `stateHome` (absolute, normalised).
 * @throws ContractError `refused` for a state home that is not absolute and normalised.
 */
export function stateHomeLayout(stateHome: string): StateHomeLayout {
  if (!absolutePath.safeParse(stateHome).success) {
    throw new ContractError('refused', 'state home: not an absolute, normalised path');
  }
  const namespace = join(stateHome, NAMESPACE_FOLDER);
  const registry = join(namespace, 'registry');
  return {
    stateHome,
    namespace,
    staging: join(namespace, STAGING_FOLDER),
    registry,
    registryFormat: join(registry, 'format.json'),
    roots: join(registry, 'roots.json'),
    registryLock: join(registry, 'registry.lock'),
    journal: join(namespace, 'journal'),
    workspaces: join(namespace, 'workspaces'),
  };
}

/** The take-over marker for the lock or marker whose token is `token`. */
export function takeoverMarker(layout: StateHomeLayout, token: string): string {
  return join(layout.registry, `takeover-${token}.lock`);
}

/**
 * Whether `path` (absolute) is a state home's registry lock or one of its take-over markers: the
 * files a `quarantine` of a lock holder that cannot be told names, which fence every writer of
 * that state home, not one workspace.
 */
export function isRegistryLockFile(path: string): boolean {
  const registry = dirname(path);
  if (!absolutePath.safeParse(path).success || registry === path) return false;
  const layout = stateHomeLayout(dirname(dirname(registry)));
  return path === layout.registryLock || (registry === layout.registry && TAKEOVER_MARKER.test(basename(path)));
}
