// The tree the power-loss model speaks of: a folder's content as names, kinds, modes and
// bytes, and its content as a key. Reading a folder (base-tree.ts), writing one
// (materialise.ts), replaying a trace (replay.ts) and the model (model.ts) all take it from
// here, so that none of them depends on another for it.

/** One name in a `Tree`. Files with the same `inode` are one file under several names (hard links). */
export type TreeNode =
  | { readonly kind: 'folder'; readonly mode: number }
  | { readonly kind: 'file'; readonly mode: number; readonly bytes: Uint8Array; readonly inode: string }
  | { readonly kind: 'symlink'; readonly target: string };

/** A folder's content: `root` is its absolute path; `entries` are keyed by path relative to it ('.' is the root, 'a/b' below it). */
export interface Tree {
  readonly root: string;
  readonly entries: Readonly<Record<string, TreeNode>>;
}

/**
 * A state's content, as a key: two trees are one state when every path shows the same kind, mode
 * and bytes, and the same names share a file. A state several crash points leave is one state.
 */
export function contentKey(tree: Tree): string {
  const firstName = new Map<string, string>();
  return Object.keys(tree.entries)
    .sort()
    .map((path) => {
      const node = tree.entries[path]!;
      if (node.kind !== 'file') return `${path} ${nodeKey(node)}`;
      if (!firstName.has(node.inode)) firstName.set(node.inode, path);
      return `${path} ${nodeKey(node)} ${firstName.get(node.inode)}`;
    })
    .join('\n');
}

/** One node's content, as a key: its kind and mode, and a file's bytes or a link's target (not which names share a file: that is the tree's). */
export function nodeKey(node: TreeNode): string {
  if (node.kind === 'folder') return `d ${node.mode}`;
  if (node.kind === 'symlink') return `l ${node.target}`;
  return `f ${node.mode} ${Buffer.from(node.bytes).toString('hex')}`;
}
