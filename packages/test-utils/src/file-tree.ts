import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';

/** One entry of a tree listing: everything a call could change, except the access time. */
export interface TreeEntry {
  readonly kind: 'file' | 'folder' | 'symlink' | 'other';
  readonly mode: number;
  readonly uid: number;
  readonly ino: string;
  readonly nlink: string;
  /** Size, mtime and ctime (ns); empty for a folder when `treeOf` leaves folder times out. */
  readonly size: string;
  readonly mtimeNs: string;
  readonly ctimeNs: string;
  /** Bytes of a regular file (hex), the target of a link; never read from a FIFO or device. */
  readonly content: string;
}

/** What `treeOf` lists of a folder: with `folderTimes: false`, not its size, mtime and ctime (its names still show). */
export interface TreeOptions {
  readonly folderTimes?: boolean;
}

/** Every name below `root` (recursively, the root itself as '.') with its stat and content; empty when `root` does not exist. */
export function treeOf(root: string, options: TreeOptions = {}): Record<string, TreeEntry> {
  const folderTimes = options.folderTimes ?? true;
  const tree: Record<string, TreeEntry> = {};
  const visit = (relative: string): void => {
    const path = relative === '.' ? root : join(root, relative);
    const stats = lstatSync(path, { bigint: true });
    const kind = stats.isFile()
      ? 'file'
      : stats.isDirectory()
        ? 'folder'
        : stats.isSymbolicLink()
          ? 'symlink'
          : 'other';
    const timeless = kind === 'folder' && !folderTimes;
    tree[relative] = {
      kind,
      mode: Number(stats.mode),
      uid: Number(stats.uid),
      ino: String(stats.ino),
      nlink: String(stats.nlink),
      size: timeless ? '' : String(stats.size),
      mtimeNs: timeless ? '' : String(stats.mtimeNs),
      ctimeNs: timeless ? '' : String(stats.ctimeNs),
      content: kind === 'file' ? readFileSync(path).toString('hex') : kind === 'symlink' ? readlinkSync(path) : '',
    };
    if (kind === 'folder') {
      for (const name of readdirSync(path).sort()) visit(relative === '.' ? name : join(relative, name));
    }
  };
  if (existsSync(root)) visit('.');
  return tree;
}
