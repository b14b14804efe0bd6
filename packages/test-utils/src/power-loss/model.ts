// The persistence model: which on-disk states a power loss may leave after a
// trace of file-system ops. The README of this package states it; every rule
// below is one sentence of that statement. It is chosen to be no kinder than
// ext4, XFS or btrfs: where they may disagree, it allows the union.
import { ROOT, Replay, type Barrier, type EntryEffect, type Rename } from './replay.js';
import type { TraceOp } from './trace.js';
import { contentKey, type Tree, type TreeNode } from './tree.js';

/** The states a crash at one point may leave, distinct by content, and how many combinations were tried to find them. */
export interface CrashStates {
  readonly states: readonly Tree[];
  readonly combinations: number;
  /** True when the cap stopped the enumeration: `states` is then only a part of what the model allows. */
  readonly capped: boolean;
}

/** The crash states after `point` ops ran (0: before the first); `after` is the last op that ran. */
export interface CrashPoint extends CrashStates {
  readonly point: number;
  readonly after?: TraceOp;
}

/** How many combinations one crash point may try before it stops and says so (2^12). */
export const CRASH_STATE_CAP = 4096;

/**
 * One possible state of a name: `horizon` is the index of the last of its
 * effects that reached the disk (-1: none, the base tree's entry); `inode`
 * what it then shows.
 */
interface NameOption {
  readonly horizon: number;
  readonly inode: string | undefined;
}

interface NameChoice {
  readonly key: string;
  readonly folder: string;
  readonly name: string;
  readonly options: readonly NameOption[];
}

function optionOf(effect: EntryEffect): NameOption {
  return { horizon: effect.index, inode: effect.inode };
}

/** The index of the last barrier on `inode` before `point`, or -1. */
function lastBarrier(barriers: readonly Barrier[], inode: string, point: number): number {
  let last = -1;
  for (const barrier of barriers)
    if (barrier.inode === inode && barrier.index < point && barrier.index > last) last = barrier.index;
  return last;
}

/**
 * Rule 1 and 2 for one name: its last effect before the folder's last
 * fsync-directory is durable; each later effect may or may not have reached
 * the disk, and the name shows the last one that did.
 */
function nameChoice(replay: Replay, effects: readonly EntryEffect[], point: number): NameChoice {
  const { key, folder, name } = effects[0]!;
  const synced = lastBarrier(replay.folderSyncs, folder, point);
  const durable = effects.filter((effect) => effect.index < synced).at(-1);
  const start: NameOption =
    durable === undefined ? { horizon: -1, inode: replay.baseEntries.get(folder)?.get(name) } : optionOf(durable);
  const later = effects.filter((effect) => effect.index > start.horizon).map(optionOf);
  const options = [start, ...later];
  return { key, folder, name, options: undominated(options, key, replay.renames) };
}

/**
 * Options that show the same inode give the same state; one is redundant when
 * another has no rename constraint it lacks (see `renameHolds`): every
 * combination valid with it is valid with the other. Of equal ones, the first is kept.
 */
function undominated(options: readonly NameOption[], key: string, renames: readonly Rename[]): NameOption[] {
  const constraints = (option: NameOption): string[] =>
    renames.flatMap((rename) => {
      if (rename.source === key && option.horizon >= rename.index) return [`needs ${rename.index}`];
      if (rename.target === key && option.horizon < rename.index) return [`breaks ${rename.index}`];
      return [];
    });
  const weighed = options.map((option) => ({ option, constraints: constraints(option) }));
  const within = (a: readonly string[], b: readonly string[]) => a.every((item) => b.includes(item));
  return weighed
    .filter(
      ({ option, constraints: mine }, index) =>
        !weighed.some(
          (other, otherIndex) =>
            otherIndex !== index &&
            other.option.inode === option.inode &&
            within(other.constraints, mine) &&
            (!within(mine, other.constraints) || otherIndex < index),
        ),
    )
    .map(({ option }) => option);
}

/**
 * Rule 3, a rename is atomic: the old name's removal never reaches the disk
 * without the new name. When the old name shows the rename's effect or a
 * later one (a later entry at the old name reached the disk, so its removal
 * did too), the new name shows the rename or a later effect.
 */
function renameHolds(renames: readonly Rename[], horizons: ReadonlyMap<string, number>, point: number): boolean {
  return renames.every((rename) => {
    if (rename.index >= point || (horizons.get(rename.source) ?? -1) < rename.index) return true;
    return (horizons.get(rename.target) ?? -1) >= rename.index;
  });
}

/**
 * Rule 4, the contents a file may show: the bytes of its last write followed
 * by an fsync of it (or its base bytes, or none for a new file), or, for each
 * later write, nothing, the write's first half, as many zero bytes, or the
 * whole write.
 */
function contentOptions(replay: Replay, inode: string, point: number): Uint8Array[] {
  const base = replay.inodes.get(inode);
  const writes = replay.writes.filter((write) => write.inode === inode && write.index < point);
  const synced = lastBarrier(replay.fileSyncs, inode, point);
  const durable = writes.filter((write) => write.index < synced).at(-1);
  const start = durable?.bytes ?? (base?.kind === 'file' ? base.bytes : new Uint8Array());
  const options = [start];
  for (const write of writes.filter((each) => each.index > (durable?.index ?? -1))) {
    const { bytes } = write;
    options.push(
      new Uint8Array(),
      bytes.subarray(0, Math.floor(bytes.byteLength / 2)),
      new Uint8Array(bytes.byteLength),
      bytes,
    );
  }
  const seen = new Set<string>();
  return options.filter((bytes) => {
    const hex = Buffer.from(bytes).toString('hex');
    if (seen.has(hex)) return false;
    seen.add(hex);
    return true;
  });
}

/** Every combination of one option per slot, in order, the first slot changing slowest. */
function* combinations<T>(slots: readonly (readonly T[])[]): Generator<T[]> {
  const counters = slots.map(() => 0);
  for (;;) {
    yield slots.map((options, index) => options[counters[index]!]!);
    let slot = slots.length - 1;
    while (slot >= 0 && counters[slot] === slots[slot]!.length - 1) counters[slot--] = 0;
    if (slot < 0) return;
    counters[slot]! += 1;
  }
}

/** The names each folder inode shows, when each changed name shows its chosen option. */
function folderEntries(
  replay: Replay,
  choices: readonly NameChoice[],
  picked: readonly NameOption[],
): Map<string, Map<string, string>> {
  const folders = new Map<string, Map<string, string>>();
  for (const [folder, names] of replay.baseEntries) folders.set(folder, new Map(names));
  choices.forEach((choice, index) => {
    const names = folders.get(choice.folder) ?? new Map<string, string>();
    folders.set(choice.folder, names);
    const inode = picked[index]!.inode;
    if (inode === undefined) names.delete(choice.name);
    else names.set(choice.name, inode);
  });
  return folders;
}

/**
 * Rule 5, what is reachable from the root is the state: an entry in a folder
 * whose own entry did not reach the disk is lost with it. A folder shown
 * under two names (a folder rename half on disk) is not a state: a folder
 * has one parent. Undefined for such a combination.
 */
function reachable(
  replay: Replay,
  folders: ReadonlyMap<string, ReadonlyMap<string, string>>,
): Map<string, string> | undefined {
  const paths = new Map<string, string>([['.', ROOT]]);
  const seenFolders = new Set([ROOT]);
  const visit = (folder: string, prefix: string): boolean => {
    for (const [name, inode] of [...(folders.get(folder) ?? [])].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const path = prefix === '.' ? name : `${prefix}/${name}`;
      paths.set(path, inode);
      if (replay.inodes.get(inode)?.kind !== 'folder') continue;
      if (seenFolders.has(inode)) return false;
      seenFolders.add(inode);
      if (!visit(inode, path)) return false;
    }
    return true;
  };
  return visit(ROOT, '.') ? paths : undefined;
}

function treeOf(
  replay: Replay,
  root: string,
  paths: ReadonlyMap<string, string>,
  contents: ReadonlyMap<string, Uint8Array>,
): Tree {
  const entries: Record<string, TreeNode> = {};
  for (const [path, inode] of paths) {
    const node = replay.inodes.get(inode)!;
    if (node.kind === 'file')
      entries[path] = { kind: 'file', mode: node.mode, bytes: contents.get(inode) ?? node.bytes, inode };
    else entries[path] = node;
  }
  return { root, entries };
}

/** Enumerates the states of one crash point, stopping at `cap` combinations. */
class Enumeration {
  readonly states: Tree[] = [];
  combinations = 0;
  capped = false;
  readonly #seen = new Set<string>();

  constructor(
    readonly replay: Replay,
    readonly root: string,
    readonly point: number,
    readonly cap: number,
  ) {}

  run(): void {
    const byName = new Map<string, EntryEffect[]>();
    for (const effect of this.replay.effects.filter((each) => each.index < this.point)) {
      byName.set(effect.key, [...(byName.get(effect.key) ?? []), effect]);
    }
    const choices = [...byName.values()].map((effects) => nameChoice(this.replay, effects, this.point));
    for (const picked of combinations(choices.map((choice) => choice.options))) {
      if (!this.#entryCombination(choices, picked)) return;
    }
  }

  /** False once the cap stopped the enumeration. */
  #entryCombination(choices: readonly NameChoice[], picked: readonly NameOption[]): boolean {
    const horizons = new Map(choices.map((choice, index) => [choice.key, picked[index]!.horizon]));
    const paths = renameHolds(this.replay.renames, horizons, this.point)
      ? reachable(this.replay, folderEntries(this.replay, choices, picked))
      : undefined;
    if (paths === undefined) return this.#count();
    const files = [...new Set(paths.values())].filter((inode) => this.replay.inodes.get(inode)?.kind === 'file');
    const slots = files.map((inode) => contentOptions(this.replay, inode, this.point));
    for (const contents of combinations(slots)) {
      if (!this.#count()) return false;
      this.#add(treeOf(this.replay, this.root, paths, new Map(files.map((inode, index) => [inode, contents[index]!]))));
    }
    return true;
  }

  #add(tree: Tree): void {
    const key = contentKey(tree);
    if (this.#seen.has(key)) return;
    this.#seen.add(key);
    this.states.push(tree);
  }

  /** Counts the combination about to be tried; false (and `capped`) when the cap was already reached, so it is not. */
  #count(): boolean {
    if (this.combinations >= this.cap) {
      this.capped = true;
      return false;
    }
    this.combinations += 1;
    return true;
  }
}

function enumerate(replay: Replay, root: string, point: number, cap: number): CrashStates {
  const enumeration = new Enumeration(replay, root, point, cap);
  enumeration.run();
  return { states: enumeration.states, combinations: enumeration.combinations, capped: enumeration.capped };
}

/**
 * The distinct states (by content) a power loss may leave when the first
 * `crashPoint` ops of `ops` ran over `base` (0: none ran), under the model
 * the README states. Throws when the trace could not have run over `base`
 * (a name that does not exist, a path outside it, a rename without a source).
 */
export function crashStates(
  base: Tree,
  ops: readonly TraceOp[],
  crashPoint: number,
  cap = CRASH_STATE_CAP,
): CrashStates {
  if (!Number.isInteger(crashPoint) || crashPoint < 0 || crashPoint > ops.length)
    throw new Error(`crash point ${crashPoint} is not in 0..${ops.length}`);
  return enumerate(new Replay(base, ops), base.root, crashPoint, cap);
}

/** The crash states at every point of the trace: before the first op, and after each. */
export function allCrashStates(base: Tree, ops: readonly TraceOp[], cap = CRASH_STATE_CAP): CrashPoint[] {
  const replay = new Replay(base, ops);
  return Array.from({ length: ops.length + 1 }, (_, point) => ({
    point,
    ...(point === 0 ? {} : { after: ops[point - 1]! }),
    ...enumerate(replay, base.root, point, cap),
  }));
}
