// A trace replayed over its base tree without a crash, as inodes and the effects of each op:
// the facts the persistence model (model.ts) chooses among. A trace that could not have run
// over the base tree is refused here, before any state is enumerated.
import type { TraceOp } from './trace.js';
import type { Tree } from './tree.js';

/** Folder modes and file modes as private-files makes them. */
const FOLDER_MODE = 0o700;
const FILE_MODE = 0o600;

type Inode =
  | { readonly kind: 'folder'; readonly mode: number }
  | { readonly kind: 'file'; readonly mode: number; readonly bytes: Uint8Array }
  | { readonly kind: 'symlink'; readonly target: string };

/** What a name in a folder (a folder inode) points at after one op: an inode, or nothing. */
export interface EntryEffect {
  readonly index: number;
  readonly key: string;
  readonly folder: string;
  readonly name: string;
  readonly inode: string | undefined;
}

export interface Rename {
  readonly index: number;
  readonly source: string;
  readonly target: string;
}

interface Write {
  readonly index: number;
  readonly inode: string;
  readonly bytes: Uint8Array;
}

/** An fsync (of a file) or an fsync-directory (of a folder): a barrier for that inode. */
export interface Barrier {
  readonly index: number;
  readonly inode: string;
}

// Inode names: a base folder or symlink by its path, a base file by its `inode`, a new one by the op that made it.
export const ROOT = 'folder:.';

function keyOf(folder: string, name: string): string {
  return `${folder}\u0000${name}`;
}

function parentOf(relative: string): { parent: string; name: string } {
  const slash = relative.lastIndexOf('/');
  return slash < 0
    ? { parent: '.', name: relative }
    : { parent: relative.slice(0, slash), name: relative.slice(slash + 1) };
}

/**
 * The trace replayed without a crash, as inodes and effects: names are
 * resolved at the time of each op, so a folder renamed later keeps its entries
 * (they belong to the folder's inode, not to a path).
 */
export class Replay {
  readonly inodes = new Map<string, Inode>();
  /** The base tree's entries per folder inode: what a name shows when none of its effects reached the disk. */
  readonly baseEntries = new Map<string, Map<string, string>>();
  readonly effects: EntryEffect[] = [];
  readonly renames: Rename[] = [];
  readonly writes: Write[] = [];
  readonly fileSyncs: Barrier[] = [];
  readonly folderSyncs: Barrier[] = [];
  /** The names as they are after the ops so far, per folder inode, to resolve the paths of the next op. */
  readonly #live = new Map<string, Map<string, string>>();
  readonly #root: string;

  constructor(base: Tree, ops: readonly TraceOp[]) {
    this.#root = base.root;
    this.#loadBase(base);
    ops.forEach((op, index) => this.#apply(op, index));
  }

  #loadBase(base: Tree): void {
    if (base.entries['.']?.kind !== 'folder') throw new Error('the base tree has no root folder');
    for (const relative of Object.keys(base.entries).sort()) {
      const node = base.entries[relative]!;
      const inode = node.kind === 'file' ? `file:${node.inode}` : `${node.kind}:${relative}`;
      if (node.kind === 'folder') this.inodes.set(inode, { kind: 'folder', mode: node.mode });
      if (node.kind === 'file') this.inodes.set(inode, { kind: 'file', mode: node.mode, bytes: node.bytes });
      if (node.kind === 'symlink') this.inodes.set(inode, { kind: 'symlink', target: node.target });
      if (node.kind === 'folder') this.#live.set(inode, new Map());
      if (relative === '.') continue;
      const { parent, name } = parentOf(relative);
      this.#live.get(`folder:${parent}`)?.set(name, inode);
    }
    for (const [folder, names] of this.#live) this.baseEntries.set(folder, new Map(names));
  }

  #apply(op: TraceOp, index: number): void {
    if (op.op === 'mkdir') this.#mkdir(op, index);
    else if (op.op === 'write') this.#write(op, index);
    else if (op.op === 'fsync') this.fileSyncs.push({ index, inode: this.#resolve(op.path) });
    else if (op.op === 'link') this.#link(op, index);
    else if (op.op === 'rename') this.#rename(op, index);
    else if (op.op === 'unlink' || op.op === 'rmdir') this.#remove(op, index);
    // Private-files tightens only a root a person made with mkdir, which no modelled protocol starts from.
    else if (op.op === 'chmod') throw new Error(`op ${index}: chmod ${op.path}: a mode change is not modelled`);
    else this.folderSyncs.push({ index, inode: this.#folder(op.path) });
  }

  #mkdir({ path, mode = FOLDER_MODE }: TraceOp, index: number): void {
    const { folder, name } = this.#place(path);
    const existing = this.#live.get(folder)!.get(name);
    // private-files takes a folder another writer made first (EEXIST): the op changed nothing.
    if (existing !== undefined && this.inodes.get(existing)?.kind === 'folder') return;
    if (existing !== undefined) throw new Error(`op ${index}: mkdir ${path}: a file is there`);
    const inode = `op${index}`;
    this.inodes.set(inode, { kind: 'folder', mode });
    this.#live.set(inode, new Map());
    this.#setEntry(index, folder, name, inode);
  }

  /** A write makes the file when the name is free (private-files opens with O_CREAT | O_EXCL), then sets its bytes. */
  #write(op: TraceOp, index: number): void {
    if (op.bytes === undefined) throw new Error(`op ${index}: write ${op.path} has no bytes`);
    const { folder, name } = this.#place(op.path);
    let inode = this.#live.get(folder)!.get(name);
    if (inode === undefined) {
      inode = `op${index}`;
      this.inodes.set(inode, { kind: 'file', mode: op.mode ?? FILE_MODE, bytes: new Uint8Array() });
      this.#setEntry(index, folder, name, inode);
    }
    if (this.inodes.get(inode)?.kind !== 'file') throw new Error(`op ${index}: write ${op.path}: not a file`);
    this.writes.push({ index, inode, bytes: op.bytes });
  }

  #link(op: TraceOp, index: number): void {
    const inode = this.#resolve(this.#sourceOf(op, index));
    const { folder, name } = this.#place(op.path);
    // A link onto a taken name fails (EEXIST): the recorded run did not succeed.
    if (this.#live.get(folder)!.has(name)) throw new Error(`op ${index}: link onto ${op.path}, which exists`);
    this.#setEntry(index, folder, name, inode);
  }

  #rename(op: TraceOp, index: number): void {
    const source = this.#sourceOf(op, index);
    const inode = this.#resolve(source);
    const from = this.#place(source);
    const to = this.#place(op.path);
    if (from.folder === to.folder && from.name === to.name) return;
    this.#setEntry(index, to.folder, to.name, inode);
    this.#setEntry(index, from.folder, from.name, undefined);
    this.renames.push({ index, source: keyOf(from.folder, from.name), target: keyOf(to.folder, to.name) });
  }

  /** An unlink or rmdir of a name already gone changed nothing (private-files ignores ENOENT there). */
  #remove(op: TraceOp, index: number): void {
    const { folder, name } = this.#place(op.path);
    const inode = this.#live.get(folder)!.get(name);
    if (inode === undefined) return;
    const isFolder = this.inodes.get(inode)?.kind === 'folder';
    if (isFolder !== (op.op === 'rmdir')) throw new Error(`op ${index}: ${op.op} ${op.path}: wrong kind of entry`);
    if (isFolder && this.#live.get(inode)!.size > 0) throw new Error(`op ${index}: rmdir ${op.path}: not empty`);
    this.#setEntry(index, folder, name, undefined);
  }

  #sourceOf(op: TraceOp, index: number): string {
    // A rename or link that does not say where it comes from cannot be replayed: guessing would model another protocol.
    if (op.source === undefined) throw new Error(`op ${index}: ${op.op} ${op.path} has no source`);
    return op.source;
  }

  #setEntry(index: number, folder: string, name: string, inode: string | undefined): void {
    const names = this.#live.get(folder)!;
    if (inode === undefined) names.delete(name);
    else names.set(name, inode);
    this.effects.push({ index, key: keyOf(folder, name), folder, name, inode });
  }

  /** The folder inode and name of `path` as the ops so far left it. */
  #place(path: string): { folder: string; name: string } {
    const parts = this.#partsOf(path);
    const name = parts.pop();
    if (name === undefined)
      throw new Error(`${path}: the root of the base tree has no folder entry the model can change`);
    return { folder: this.#walk(parts, path), name };
  }

  #resolve(path: string): string {
    const parts = this.#partsOf(path);
    const name = parts.pop();
    if (name === undefined) return ROOT;
    const inode = this.#live.get(this.#walk(parts, path))!.get(name);
    if (inode === undefined) throw new Error(`${path} does not exist at this point of the trace`);
    return inode;
  }

  #folder(path: string): string {
    const inode = this.#resolve(path);
    if (!this.#live.has(inode)) throw new Error(`${path} is not a folder`);
    return inode;
  }

  #walk(parts: readonly string[], path: string): string {
    let folder = ROOT;
    for (const part of parts) {
      const next = this.#live.get(folder)!.get(part);
      if (next === undefined || !this.#live.has(next))
        throw new Error(`${path}: a folder above it does not exist at this point of the trace`);
      folder = next;
    }
    return folder;
  }

  #partsOf(path: string): string[] {
    if (path === this.#root) return [];
    const prefix = this.#root === '/' ? '/' : `${this.#root}/`;
    // An op outside the base tree would change a state the model does not hold.
    if (!path.startsWith(prefix))
      throw new Error(`${path} is outside the base tree ${this.#root}; take the base tree of a folder above it`);
    return path.slice(prefix.length).split('/');
  }
}
