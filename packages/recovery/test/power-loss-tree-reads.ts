// What a state holds, read from the tree itself (docs/ownership.md, "Words"), not through
// the packages under test: the power-loss checks (./power-loss-checks.ts) compare what the
// real library answers with what these hand reads say is there.
import { relative } from 'node:path';
import { decodeBytes, recoveryRecordSchema } from '@leasehold/contracts';
import { rootsOverlap } from '@leasehold/registry';
import { fencesOf, handPlaces, type Tree } from '@leasehold/test-utils';
import { RECOVERY_RECORD_BYTES } from '../src/journal.js';

/** The parsed JSON of a file of the tree; undefined when absent, 'unreadable' when it does not parse. */
function documentIn(tree: Tree, path: string): unknown {
  const node = tree.entries[relative(tree.root, path)];
  if (node === undefined) return undefined;
  if (node.kind !== 'file') return 'unreadable';
  try {
    return JSON.parse(Buffer.from(node.bytes).toString('utf8')) as unknown;
  } catch {
    return 'unreadable';
  }
}

/** The service fences of `root` in the tree (docs/ownership.md, "Words"); a fence file that does not parse counts, since it cannot be proved not to be one. */
export function fencesIn(tree: Tree, stateHome: string, root: string): string[] {
  return fencesOf(
    { json: (path) => documentIn(tree, path), exists: (path) => tree.entries[relative(tree.root, path)] !== undefined },
    stateHome,
    root,
  );
}

interface Row {
  readonly root: string;
  readonly endpoint: string;
}

/** Every pair of registry rows in the tree that overlap or share an endpoint (docs/ownership.md, "Exclusion"), as text. */
export function clashingRows(tree: Tree, stateHome: string): string[] {
  const document = documentIn(tree, handPlaces(stateHome, '/').roots);
  if (document === 'unreadable') return ['roots.json does not parse'];
  const rows = (document as { entries?: Row[] } | undefined)?.entries ?? [];
  return rows.flatMap((row, index) =>
    rows.slice(index + 1).flatMap((other) => {
      if (rootsOverlap(row.root, other.root)) return [`${row.root} overlaps ${other.root}`];
      if (row.endpoint === other.endpoint) return [`${row.root} and ${other.root} share ${row.endpoint}`];
      return [];
    }),
  );
}

/** A file's bytes in the tree as text (hex), or 'absent'. */
function bytesIn(tree: Tree, path: string): string {
  const node = tree.entries[relative(tree.root, path)];
  return node?.kind === 'file' ? Buffer.from(node.bytes).toString('hex') : (node?.kind ?? 'absent');
}

/**
 * For a crash inside a recovery: its record is durable before its first
 * effect (docs/ownership.md, "The journal record"). A state where any fence of `root` differs from the start
 * (`before`) holds a whole record of `root` (decoded with the real schema).
 */
export function effectWithoutRecord(state: Tree, before: Tree, stateHome: string, root: string): string[] {
  const places = handPlaces(stateHome, root);
  const fenceFiles = [places.roots, places.registration, places.ownerLock, places.capability, places.checkoutLock];
  if (fenceFiles.every((path) => bytesIn(state, path) === bytesIn(before, path))) return [];
  const journal = `${relative(state.root, places.journal)}/`;
  const recorded = Object.entries(state.entries).some(([path, node]) => {
    if (!path.startsWith(journal) || node.kind !== 'file') return false;
    try {
      return decodeBytes(recoveryRecordSchema, node.bytes, RECOVERY_RECORD_BYTES, path).root === root;
    } catch {
      return false;
    }
  });
  return recorded ? [] : [`${root}: a recovery effect is on disk without a whole record in the journal`];
}
