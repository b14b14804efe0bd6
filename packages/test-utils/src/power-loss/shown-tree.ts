import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeTemporaryFolder } from '../temporary-folders.js';
import { baseTree } from './base-tree.js';
import type { Tree } from './tree.js';

/** A state as text: each path below the root with '<folder>', `-> target` for a symbolic link, or a file's text, with `=path` on a second name of one file. */
export type ShownTree = Record<string, string>;

/** A fresh temp folder holding `folders` (0700, in order) and `files` (path to text, 0600), made by hand, and its base tree. */
export function makeBaseTree(
  files: Readonly<Record<string, string>> = {},
  folders: readonly string[] = [],
): { root: string; base: Tree } {
  const root = makeTemporaryFolder('power-loss-');
  for (const folder of folders) mkdirSync(join(root, folder), { mode: 0o700 });
  for (const [path, text] of Object.entries(files)) writeFileSync(join(root, path), text, { mode: 0o600 });
  return { root, base: baseTree(root) };
}

/** `tree` as text, for a test to compare states at a glance (`ShownTree`). */
export function shownTree(tree: Tree): ShownTree {
  const first = new Map<string, string>();
  const listing: ShownTree = {};
  for (const path of Object.keys(tree.entries).sort()) {
    const node = tree.entries[path]!;
    if (path === '.') continue;
    if (node.kind !== 'file') {
      listing[path] = node.kind === 'folder' ? '<folder>' : `-> ${node.target}`;
      continue;
    }
    const text = Buffer.from(node.bytes).toString('latin1');
    listing[path] = first.has(node.inode) ? `${text} =${first.get(node.inode)}` : text;
    if (!first.has(node.inode)) first.set(node.inode, path);
  }
  return listing;
}
