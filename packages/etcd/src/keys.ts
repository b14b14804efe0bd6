import { ContractError, absolutePath, decode, etcdPrefix } from '@leasehold/contracts';

/** etcd's default bound of the operations (and of the compares) one transaction may hold. */
export const TXN_OPS_BOUND = 128;

/**
 * The deepest root acquire can check in one transaction: one compare per ancestor, one range
 * compare for the root and below, one for the endpoint.
 */
export const MAX_ROOT_DEPTH = TXN_OPS_BOUND - 2;

/** Every key of one state home, under its prefix. Roots end in `/`, so a prefix range stays segment-aware. */
export interface KeyLayout {
  readonly prefix: string;
  fence(root: string): string;
  owner(root: string): string;
  endpoint(host: string, endpoint: string): string;
  /** One ownership's write-sequence key (on its lease): its fenced writes' count and the id of the last. */
  writes(epoch: string): string;
  journal(id: string): string;
  /** The prefix of the waiters' keys of `root` (each on its waiter's lease, named by a token): segment-safe, the root encoded whole. */
  waiters(root: string): string;
  /** The prefix of every fence key (and of every owner key, and of every journal record). */
  readonly fences: string;
  readonly owners: string;
  readonly journals: string;
  /** The root a fence or owner key names. */
  rootOf(key: string): string;
}

/** @throws ContractError `refused` for a prefix contracts' `etcdPrefix` refuses (one rule, the one a format document is checked by). */
export function keyLayout(prefix: string): KeyLayout {
  decode(etcdPrefix, prefix, 'prefix');
  const fences = `${prefix}/fence`;
  const owners = `${prefix}/owner`;
  return {
    prefix,
    fence: (root) => fences + rootKey(root),
    owner: (root) => owners + rootKey(root),
    endpoint: (host, endpoint) => `${prefix}/endpoint/${encodeURIComponent(host)}/${encodeURIComponent(endpoint)}`,
    writes: (epoch) => `${prefix}/writes/${epoch}`,
    journal: (id) => `${prefix}/journal/${id}`,
    waiters: (root) => `${prefix}/waiter/${encodeURIComponent(root)}/`,
    fences: `${fences}/`,
    owners: `${owners}/`,
    journals: `${prefix}/journal/`,
    rootOf(key) {
      const base = key.startsWith(fences) ? fences : owners;
      const path = key.slice(base.length);
      return path === '/' ? '/' : path.slice(0, -1);
    },
  };
}

/** A root as a key segment: always ending in `/`. */
function rootKey(root: string): string {
  return root === '/' ? '/' : `${root}/`;
}

/** Checks a root (absolute, normalised, at most `MAX_ROOT_DEPTH` deep) and gives its ancestors, outermost first. */
export function ancestorsOf(root: string): string[] {
  decode(absolutePath, root, 'root');
  const segments = root === '/' ? [] : root.slice(1).split('/');
  if (segments.length > MAX_ROOT_DEPTH) {
    throw new ContractError(
      'refused',
      `root: ${segments.length} levels deep; one etcd transaction (at most ${TXN_OPS_BOUND} operations) can check roots up to ${MAX_ROOT_DEPTH} levels`,
    );
  }
  return segments.map((_, depth) => `/${segments.slice(0, depth).join('/')}`);
}
