import { workspacePlaces, type Backend, type WorkspacePlaces } from '@leasehold/contracts';
import { FolderMarks, PrivateFiles, type PrivateFilesHooks } from '@leasehold/private-files';
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
  /** The marks of workspace folders (the folder's own fence, SPEC 5.1a). */
  readonly marks: FolderMarks;
  /** The backend this state home is used with (a folder's mark names it). */
  readonly backend: Backend;
  readonly registry: Registry;
}

/** What the Registry of a state home takes from coordination's options. */
function registryOptionsOf(options: CoordinationOptions): RegistryOptions {
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
  return stateHomeWorkspaces(options).open(root);
}

const FILE_BACKEND: Backend = { kind: 'files' };

/** How many roots' places one `StateHomeWorkspaces` keeps before it forgets them all. */
const KNOWN_ROOTS = 1024;

/** The workspaces of one state home, opened over its one registry and private files. */
export interface StateHomeWorkspaces {
  readonly registry: Registry;
  /**
   * The workspace `root`, its places built now. Reads and writes nothing.
   * @throws ContractError `refused` for a root that is not absolute and normalised.
   */
  readonly open: (root: string) => Workspace;
}

/**
 * The workspaces of the state home the options name, sharing its private
 * files and registry (neither keeps anything across operations), so that
 * one `Ownership` builds only a root's places for each call.
 * @throws ContractError `refused` for a state home that is not absolute and normalised.
 */
export function stateHomeWorkspaces(options: CoordinationOptions = {}): StateHomeWorkspaces {
  const stateHome = options.stateHome ?? defaultStateHome();
  const hooks = options.hooks === undefined ? {} : { hooks: options.hooks };
  const registry = new Registry(stateHome, registryOptionsOf(options));
  const files = new PrivateFiles(registry.layout.namespace, hooks);
  const marks = new FolderMarks(hooks);
  const backend = options.backend ?? FILE_BACKEND;
  // A root's places are a pure function of the root and the state home, and building them (a
  // SHA-256 and a score of joins) cost a tenth of an inspect(): kept for the roots last used.
  const known = new Map<string, WorkspacePlaces>();
  return {
    registry,
    open: (root) => {
      let places = known.get(root);
      if (places === undefined) {
        places = workspacePlaces(root, stateHome);
        if (known.size === KNOWN_ROOTS) known.clear();
        known.set(root, places);
      }
      return { root: places.root, places, files, marks, backend, registry };
    },
  };
}
