// Reading a folder into a `Tree`: the durable state a recorded trace starts from
// (materialise.ts is the way back, a tree written to disk).
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Tree, TreeNode } from './tree.js';

/**
 * The durable starting state of a trace: every entry below `folder` (which
 * must exist), taken before the first op runs. Files keep their bytes and
 * mode, and two names of one file (a hard link) keep sharing one `inode`.
 */
export function baseTree(folder: string): Tree {
  const entries: Record<string, TreeNode> = {};
  const visit = (relative: string): void => {
    const path = relative === '.' ? folder : join(folder, relative);
    const node = nodeAt(path);
    entries[relative] = node;
    if (node.kind !== 'folder') return;
    for (const name of readdirSync(path).sort()) visit(relative === '.' ? name : `${relative}/${name}`);
  };
  visit('.');
  if (entries['.']?.kind !== 'folder') throw new Error(`baseTree: ${folder} is not a folder`);
  return { root: folder, entries };
}

function nodeAt(path: string): TreeNode {
  const stats = lstatSync(path, { bigint: true });
  const mode = Number(stats.mode) & 0o7777;
  if (stats.isDirectory()) return { kind: 'folder', mode };
  if (stats.isFile())
    return { kind: 'file', mode, bytes: new Uint8Array(readFileSync(path)), inode: `base:${stats.dev}:${stats.ino}` };
  if (stats.isSymbolicLink()) return { kind: 'symlink', target: readlinkSync(path) };
  // A FIFO or device has no bytes a crash could lose or keep: the model has no place for it.
  throw new Error(`baseTree: ${path} is neither a file, a folder nor a symbolic link`);
}
