import { basename, dirname, join } from 'node:path';
import { sha256 } from './codec.js';
import { ContractError } from './contract-error.js';
import { absolutePath } from './primitives.js';

// The on-disk layout (docs/layout.md), named once: every folder and file name of a state home and
// of a workspace's private root. Path arithmetic only; nothing here touches the file system.

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

/** The name of the staging folder below a private-files root, where every new file is written first. */
export const STAGING_FOLDER = '.staging';
/** The namespace folder below a state home; every file of the ownership protocol lives under it. */
export const NAMESPACE_FOLDER = 'v1';
const REGISTRY_FOLDER = 'registry';
const JOURNAL_FOLDER = 'journal';
const WORKSPACES_FOLDER = 'workspaces';
/** The only names allowed in the namespace folder `<stateHome>/v1` (besides the staging folder). */
export const NAMESPACE_ENTRIES = [REGISTRY_FOLDER, JOURNAL_FOLDER, WORKSPACES_FOLDER] as const;
/** A take-over marker in the registry folder: `takeover-<token of the lock or marker it takes over>.lock`. */
export const TAKEOVER_MARKER = new RegExp(`^takeover-${UUID}\\.lock$`);
const REGISTRY_FILES = { format: 'format.json', roots: 'roots.json', lock: 'registry.lock' } as const;
/** The only names allowed in `<ns>/registry/`. */
export const REGISTRY_FOLDER_ENTRIES: readonly (string | RegExp)[] = [
  REGISTRY_FILES.format,
  REGISTRY_FILES.roots,
  REGISTRY_FILES.lock,
  TAKEOVER_MARKER,
];
/** A journal record's name: the time it was made (so names sort oldest first), then a random UUID. */
export const JOURNAL_RECORD_NAME = new RegExp(`^[0-9TZ]+-${UUID}\\.json$`);
/** The name of a workspace's private root folder: the first 32 hex digits of the SHA-256 of its root. */
export const PRIVATE_ROOT_NAME = /^[0-9a-f]{32}$/;
const CHECKOUT_LOCK = 'checkout.lock';
const SERVICE_FOLDER = 'service';
/** The only names allowed in a workspace's private root. */
export const PRIVATE_ROOT_ENTRIES = [CHECKOUT_LOCK, SERVICE_FOLDER] as const;
/** The name in the service folder of each service file Leasehold writes or reads (keyed as in `WorkspacePlaces`). */
export const SERVICE_FILE_NAMES = {
  format: 'format.json',
  config: 'config.json',
  hostConfig: 'host-config.json',
  registration: 'registration.json',
  ownerLock: 'owner.lock',
  capability: 'local-capability.json',
  companion: 'companion.json',
} as const;
/** The only names allowed in a service folder; the last three belong to the service and are never read. */
export const SERVICE_ENTRIES = [
  SERVICE_FILE_NAMES.format,
  SERVICE_FILE_NAMES.config,
  SERVICE_FILE_NAMES.hostConfig,
  SERVICE_FILE_NAMES.registration,
  SERVICE_FILE_NAMES.ownerLock,
  SERVICE_FILE_NAMES.capability,
  SERVICE_FILE_NAMES.companion,
  'access-config.json',
  'access.json',
  'history',
] as const;
/**
 * The folder of start claims, `<stateHome>/start-claims/`: beside the `v1` namespace, not in it.
 * Every folder under `v1` admits only the names listed here, and a live owner re-reads its
 * workspace's folders on every check: a claim there would make that owner fence itself.
 */
export const START_CLAIMS_FOLDER = 'start-claims';
/**
 * The folder of waiters' tickets, `<stateHome>/waiters/`: beside the `v1` namespace, as the start
 * claims are, so that no owner's check of its own folders ever meets one.
 */
export const WAITERS_FOLDER = 'waiters';
/** A waiter's ticket: `<private root name>.<its place in line, 16 digits>.json`. */
export const WAIT_TICKET_NAME = /^[0-9a-f]{32}\.[0-9]{16}\.json$/;
/** A start claim's name: `<private root name>.json`. */
export const START_CLAIM_NAME = /^[0-9a-f]{32}\.json$/;
/** A start claim's take-over marker: `<private root name>.takeover-<token of the claim it takes over>.json`. */
export const START_CLAIM_MARKER_NAME = new RegExp(`^[0-9a-f]{32}\\.takeover-${UUID}\\.json$`);

/**
 * The folder's own fence (SPEC 5.1a): a dot-folder in the workspace root, hidden from version
 * control by a `.gitignore` of `*` inside it (as pytest, mypy and ruff make theirs), holding the
 * mark of the ownership that holds the folder, whatever the state home.
 */
const FOLDER_MARK_FOLDER = '.leasehold';
/** The mark's name in the dot-folder. */
const FOLDER_MARK_NAME = 'owner.json';
/** What hides the dot-folder from version control: a `.gitignore` of `*`. */
const FOLDER_MARK_IGNORE = '.gitignore';

/** Where a folder's mark lives. */
export interface FolderMarkPlaces {
  /** `<root>/.leasehold`. */
  readonly folder: string;
  /** `<root>/.leasehold/owner.json`. */
  readonly mark: string;
  /** `<root>/.leasehold/.gitignore`. */
  readonly ignore: string;
}

/**
 * The mark places of the folder `root` (absolute, normalised).
 * @throws ContractError `refused` for a root that is not absolute and normalised.
 */
export function folderMarkPlaces(root: string): FolderMarkPlaces {
  const folder = join(checkedPath(root, 'workspace root'), FOLDER_MARK_FOLDER);
  return { folder, mark: join(folder, FOLDER_MARK_NAME), ignore: join(folder, FOLDER_MARK_IGNORE) };
}

/** Every state-home-wide path: what all workspaces of one state home share. */
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

function checkedPath(path: string, label: string): string {
  if (!absolutePath.safeParse(path).success)
    throw new ContractError('refused', `${label}: not an absolute, normalised path`);
  return path;
}

/**
 * The layout of `stateHome` (absolute, normalised).
 * @throws ContractError `refused` for a state home that is not absolute and normalised.
 */
export function stateHomeLayout(stateHome: string): StateHomeLayout {
  checkedPath(stateHome, 'state home');
  const namespace = join(stateHome, NAMESPACE_FOLDER);
  const registry = join(namespace, REGISTRY_FOLDER);
  return {
    stateHome,
    namespace,
    staging: join(namespace, STAGING_FOLDER),
    registry,
    registryFormat: join(registry, REGISTRY_FILES.format),
    roots: join(registry, REGISTRY_FILES.roots),
    registryLock: join(registry, REGISTRY_FILES.lock),
    journal: join(namespace, JOURNAL_FOLDER),
    workspaces: join(namespace, WORKSPACES_FOLDER),
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

/** The path of a new journal record made at `now`, `token` (a random UUID) telling apart records of one instant. */
export function journalRecord(layout: StateHomeLayout, now: Date, token: string): string {
  return join(layout.journal, `${now.toISOString().replace(/[-:.]/g, '')}-${token}.json`);
}

/** The paths below one private root of a state home: what a workspace's private root holds. */
export interface PrivateRootPlaces extends StateHomeLayout {
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

/** Every path Leasehold uses for one workspace in one state home: the state home's shared layout and the workspace's own files. */
export interface WorkspacePlaces extends PrivateRootPlaces {
  readonly root: string;
  /** The folder's own mark, `<root>/.leasehold/owner.json` (`folderMarkPlaces`). */
  readonly mark: string;
}

/**
 * The paths below the private root named `name` (a `PRIVATE_ROOT_NAME`) of `stateHome`, whatever
 * root it is of: for readers that walk `workspaces/`.
 * @throws ContractError `refused` for a state home that is not absolute and normalised, or a name that is not a private root's.
 */
export function privateRootPlaces(stateHome: string, name: string): PrivateRootPlaces {
  const layout = stateHomeLayout(stateHome);
  if (!PRIVATE_ROOT_NAME.test(name))
    throw new ContractError('refused', `${join(layout.workspaces, name)}: not a private root's name`);
  const privateRoot = join(layout.workspaces, name);
  const service = join(privateRoot, SERVICE_FOLDER);
  return {
    ...layout,
    privateRoot,
    checkoutLock: join(privateRoot, CHECKOUT_LOCK),
    service,
    format: join(service, SERVICE_FILE_NAMES.format),
    config: join(service, SERVICE_FILE_NAMES.config),
    hostConfig: join(service, SERVICE_FILE_NAMES.hostConfig),
    registration: join(service, SERVICE_FILE_NAMES.registration),
    ownerLock: join(service, SERVICE_FILE_NAMES.ownerLock),
    capability: join(service, SERVICE_FILE_NAMES.capability),
    companion: join(service, SERVICE_FILE_NAMES.companion),
  };
}

/**
 * The places of `root` (absolute, normalised) under `stateHome`.
 * @throws ContractError `refused` for a root or state home that is not absolute and normalised.
 */
export function workspacePlaces(root: string, stateHome: string): WorkspacePlaces {
  const { mark } = folderMarkPlaces(root);
  return { ...privateRootPlaces(stateHome, sha256(new TextEncoder().encode(root)).slice(0, 32)), root, mark };
}

/** The start claim of one workspace in one state home, beside the namespace (`START_CLAIMS_FOLDER`). */
export interface StartClaimPlaces {
  /** `<stateHome>/start-claims`. */
  readonly folder: string;
  /** `<folder>/<private root name>.json`. */
  readonly claim: string;
  /** The start of the name of each of this claim's take-over markers (`START_CLAIM_MARKER_NAME`). */
  readonly markerPrefix: string;
}

/**
 * The start claim of `root` (absolute, normalised) under `stateHome`: named after the workspace's private root.
 * @throws ContractError `refused` for a root or state home that is not absolute and normalised.
 */
export function startClaimPlaces(root: string, stateHome: string): StartClaimPlaces {
  const name = basename(workspacePlaces(root, stateHome).privateRoot);
  const folder = join(stateHome, START_CLAIMS_FOLDER);
  return { folder, claim: join(folder, `${name}.json`), markerPrefix: `${name}.takeover-` };
}

/** Where the waiters of one workspace of one state home keep their tickets. */
export interface WaitTicketPlaces {
  /** `<stateHome>/waiters`. */
  readonly folder: string;
  /** `<private root name>.`: what starts the name of each of this workspace's tickets. */
  readonly prefix: string;
}

/**
 * The tickets of the waiters of `root` under `stateHome`.
 * @throws ContractError `refused` for a root or state home that is not absolute and normalised.
 */
export function waitTicketPlaces(root: string, stateHome: string): WaitTicketPlaces {
  const name = basename(workspacePlaces(root, stateHome).privateRoot);
  return { folder: join(stateHome, WAITERS_FOLDER), prefix: `${name}.` };
}

/** The take-over marker of `claim` for the claim whose token is `token`. */
export function startClaimMarker(claim: StartClaimPlaces, token: string): string {
  return join(claim.folder, `${claim.markerPrefix}${token}.json`);
}
