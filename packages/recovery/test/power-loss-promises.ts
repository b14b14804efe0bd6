// What a finished operation promised its caller (docs/persistence.md, "What a returned call
// promises"), checked on the states of a trace's last crash point: a power loss after the
// call returned must not take it back.
import { relative } from 'node:path';
import { contentKey, handPlaces, nodeKey, type CrashPoint, type Tree } from '@leasehold/test-utils';
import type { Recorded } from './power-loss.js';

/** The tree without what no promise covers: the registry lock (not a fence, removed without a folder fsync; see the registry README) and the staging folder's entries (temps, swept by the next writer). */
function promised(tree: Tree, stateHome: string): Tree {
  const places = handPlaces(stateHome, '/');
  const lock = relative(tree.root, places.registryLock);
  const staging = `${relative(tree.root, places.staging)}/`;
  return {
    root: tree.root,
    entries: Object.fromEntries(
      Object.entries(tree.entries).filter(([path]) => path !== lock && !path.startsWith(staging)),
    ),
  };
}

/**
 * What a finished operation promised its caller (docs/persistence.md, "What
 * a returned call promises": durable before the call returns), which a power loss after it returned must not
 * take back: every state of the last crash point is the state the run left,
 * but for what `promised` leaves out. So an acquire's fences survive (else,
 * after the reboot, another owner would acquire without the recovery that
 * reviews what the dead one left), a reservation's row, a phase; and a
 * release or recovery stays done: a cleanly stopped workspace needs no
 * `leasehold recover` after a power loss.
 */
export function promiseBroken(recorded: Pick<Recorded, 'where' | 'finished'>, last: CrashPoint): string[] {
  const { stateHome } = recorded.where.place;
  const finished = promised(recorded.finished, stateHome);
  const expected = contentKey(finished);
  const differing = last.states
    .map((state) => promised(state, stateHome))
    .filter((state) => contentKey(state) !== expected);
  if (differing.length === 0) return [];
  const paths = new Set(differing.flatMap((state) => changedPaths(state, finished)));
  return [
    `after the operation returned, ${differing.length} state(s) differ from what it left, at ${[...paths].sort().join(', ')}`,
  ];
}

/** The paths at which two trees differ (by kind, mode, bytes or target). */
function changedPaths(a: Tree, b: Tree): string[] {
  const keyAt = (tree: Tree, path: string) => {
    const node = tree.entries[path];
    return node === undefined ? 'absent' : nodeKey(node);
  };
  const paths = new Set([...Object.keys(a.entries), ...Object.keys(b.entries)]);
  return [...paths].filter((path) => keyAt(a, path) !== keyAt(b, path));
}
