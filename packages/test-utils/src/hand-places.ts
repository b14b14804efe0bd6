import { join } from 'node:path';
import { sha256Hex } from './bytes.js';
import { jsonOf, pathExists } from './files-by-hand.js';

/** The files of one workspace in one state home, computed here from docs/layout.md, not by the packages. */
export interface HandPlaces {
  readonly namespace: string;
  readonly staging: string;
  readonly journal: string;
  readonly registryLock: string;
  readonly registryFormat: string;
  readonly roots: string;
  readonly privateRoot: string;
  readonly privateRootName: string;
  readonly checkoutLock: string;
  readonly service: string;
  readonly format: string;
  readonly config: string;
  readonly registration: string;
  readonly ownerLock: string;
  readonly capability: string;
  readonly companion: string;
  /** The folder's own mark, in the workspace itself (docs/layout.md, "The folder's own mark"). */
  readonly mark: string;
}

/** Where a workspace's files are (docs/layout.md, "A workspace's private root" and "The service folder"). */
export function handPlaces(stateHome: string, root: string): HandPlaces {
  const namespace = join(stateHome, 'v1');
  const privateRootName = sha256Hex(root).slice(0, 32);
  const privateRoot = join(namespace, 'workspaces', privateRootName);
  const service = join(privateRoot, 'service');
  return {
    namespace,
    staging: join(namespace, '.staging'),
    journal: join(namespace, 'journal'),
    registryLock: join(namespace, 'registry', 'registry.lock'),
    registryFormat: join(namespace, 'registry', 'format.json'),
    roots: join(namespace, 'registry', 'roots.json'),
    privateRoot,
    privateRootName,
    checkoutLock: join(privateRoot, 'checkout.lock'),
    service,
    format: join(service, 'format.json'),
    config: join(service, 'config.json'),
    registration: join(service, 'registration.json'),
    ownerLock: join(service, 'owner.lock'),
    capability: join(service, 'local-capability.json'),
    companion: join(service, 'companion.json'),
    mark: join(root, '.leasehold', 'owner.json'),
  };
}

/** How `fencesOf` reads a state: a file's parsed JSON (undefined when absent, 'unreadable' when it does not parse), and whether a name exists. */
export interface StateReader {
  readonly json: (path: string) => unknown;
  readonly exists: (path: string) => boolean;
}

/** The service fences of `root` (docs/ownership.md, "Words") that remain, found with node:fs and JSON.parse alone. */
export function serviceFences(stateHome: string, root: string): string[] {
  return fencesOf({ json: jsonOf, exists: pathExists }, stateHome, root);
}

/** The service fences of `root` (docs/ownership.md, "Words") in the state `read` reads: on disk (`serviceFences`), or a crash state in memory. */
export function fencesOf(read: StateReader, stateHome: string, root: string): string[] {
  // A registry row for the root, `owner.lock`, the capability, the companion, a registration that is
  // not `stopped`, a checkout lock that carries a registration's checkout token, the folder's own mark. (The registry lock is not a fence: the
  // next writer takes a dead holder's lock over.) A file that does not parse counts as a fence (it
  // cannot be proven not to be one).
  const places = handPlaces(stateHome, root);
  const fences: string[] = [];
  const roots = read.json(places.roots) as { entries?: { root?: unknown }[] } | 'unreadable' | undefined;
  if (roots === 'unreadable') fences.push('roots.json (unreadable)');
  else if (roots?.entries?.some((entry) => entry.root === root) === true) fences.push('registry row');
  if (read.exists(places.ownerLock)) fences.push('owner.lock');
  if (read.exists(places.capability)) fences.push('local-capability.json');
  if (read.exists(places.companion)) fences.push('companion.json');
  const registration = read.json(places.registration) as
    { phase?: unknown; checkoutToken?: unknown } | 'unreadable' | undefined;
  if (registration === 'unreadable') fences.push('registration.json (unreadable)');
  else if (registration !== undefined && registration.phase !== 'stopped')
    fences.push(`registration (${String(registration.phase)})`);
  const checkout = read.json(places.checkoutLock) as { token?: unknown } | 'unreadable' | undefined;
  if (checkout === 'unreadable') fences.push('checkout.lock (unreadable)');
  else if (checkout !== undefined && registration !== 'unreadable' && checkout.token === registration?.checkoutToken) {
    fences.push("checkout.lock (a registration's)");
  }
  if (read.exists(places.mark)) fences.push('folder mark');
  return fences;
}
