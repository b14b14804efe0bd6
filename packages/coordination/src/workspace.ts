import { workspacePlaces, type Backend, type WorkspacePlaces } from '@leasehold/contracts';
import { PrivateFiles, type PrivateFilesHooks } from '@leasehold/private-files';
import { Registry, type RegistryOptions } from '@leasehold/registry';
import { defaultStateHome } from './places.js';

export interface CoordinationOptions {
  /** Defaults to `defaultStateHome()`. */
  readonly stateHome?: string;
  /** Handed to every PrivateFiles used (tests only). */
  readonly hooks?: PrivateFilesHooks;
  /** Bound of the registry lock wait, in milliseconds (default 2000). */
  readonly lockWaitMs?: number;
  /**
   * The backend this state home is used with (default the file backend), handed to its Registry:
   * a new state home records it, and one that records another refuses every transaction.
   */
  readonly backend?: Backend;
}

/**
 * One workspace of one state home, with the collaborators every step over it
 * uses, built once: its places, its private files (this host's namespace) and
 * the state home's registry. Every function of this package that reads or
 * writes a workspace takes this one value.
 */
export interface Workspace {
  /** The workspace root (`places.root`). */
  readonly root: string;
  readonly places: WorkspacePlaces;
  readonly files: PrivateFiles;
  readonly registry: Registry;
}

/** What the Registry of a state home takes from coordination's options. */
export function registryOptionsOf(options: CoordinationOptions): RegistryOptions {
  return {
    ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
    ...(options.lockWaitMs === undefined ? {} : { lockWaitMs: options.lockWaitMs }),
    ...(options.backend === undefined ? {} : { backend: options.backend }),
  };
}

/**
 * The workspace `root` of the state home the options name, its collaborators
 * built once. Pass the root through `resolveWorkspace` first, so that every
 * path to one folder names one workspace. Reads and writes nothing.
 * @throws ContractError `refused` for a root or state home that is not absolute and normalised.
 */
export function openWorkspace(root: string, options: CoordinationOptions = {}): Workspace {
  const places = workspacePlaces(root, options.stateHome ?? defaultStateHome());
  const hooks = options.hooks === undefined ? {} : { hooks: options.hooks };
  return {
    root: places.root,
    places,
    files: new PrivateFiles(places.namespace, hooks),
    registry: new Registry(places.stateHome, registryOptionsOf(options)),
  };
}
