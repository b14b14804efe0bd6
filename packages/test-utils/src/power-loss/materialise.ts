import { chmodSync, linkSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Tree } from './tree.js';

/**
 * Writes `tree` at `folder` (by default the tree's own root, so that documents
 * naming absolute paths stay true), replacing whatever is there: folders and
 * files get the tree's modes (0700 and 0600 for those the trace made, as
 * private-files makes them), names of one file become hard links of one file.
 */
export function materialise(tree: Tree, folder: string = tree.root): void {
  rmSync(folder, { recursive: true, force: true });
  mkdirSync(folder, { mode: 0o700 });
  const paths = Object.keys(tree.entries)
    .filter((path) => path !== '.')
    .sort();
  const firstName = new Map<string, string>();
  // Sorted, a folder comes before every name below it.
  for (const path of paths) {
    const node = tree.entries[path]!;
    const target = join(folder, path);
    if (node.kind === 'folder') mkdirSync(target, { mode: 0o700 });
    if (node.kind === 'symlink') symlinkSync(node.target, target);
    if (node.kind !== 'file') continue;
    const linked = firstName.get(node.inode);
    if (linked === undefined) writeFileSync(target, node.bytes, { mode: 0o600, flag: 'wx' });
    else linkSync(linked, target);
    firstName.set(node.inode, linked ?? target);
    chmodSync(target, node.mode);
  }
  // Folder modes last and deepest first: a folder without write permission must not stop its own entries.
  for (const path of ['.', ...paths].reverse()) {
    const node = tree.entries[path];
    if (node?.kind === 'folder') chmodSync(join(folder, path), node.mode);
  }
}
