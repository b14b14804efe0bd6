// The persistence model's own tests: one per rule the README states, each on
// a hand-written trace over a real temp folder, asserting exactly the states
// a power loss may leave; then toy protocols recorded, explored and written
// back to disk the way the recovery harness explores the real ones.
// (@leasehold/private-files tests the same tool on traces of its real calls.)
import { closeSync, fsyncSync, linkSync, openSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bytesOf } from '../bytes.js';
import { cleanUp } from '../clean-up.js';
import { isMissing } from '../files-by-hand.js';
import { materialise } from './materialise.js';
import { allCrashStates, crashStates } from './model.js';
import { recordTrace, type TraceHooks, type TraceOp } from './trace.js';
import { baseTree } from './base-tree.js';
import { contentKey, type Tree } from './tree.js';
import { makeBaseTree, shownTree, type ShownTree } from './shown-tree.js';

afterEach(cleanUp);

type Shown = ShownTree;

function sorted(states: readonly Shown[]): Shown[] {
  return [...states].sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
}

/** Every state a crash after the first `point` ops may leave, shown and sorted; the enumeration must be whole. */
function statesAt(base: Tree, ops: readonly TraceOp[], point = ops.length): Shown[] {
  const { states, capped } = crashStates(base, ops, point);
  expect(capped).toBe(false);
  return sorted(states.map(shownTree));
}

/** The ops of a trace, written relative to `root`. */
function opsIn(root: string) {
  const at = (path: string) => (path === '.' ? root : join(root, path));
  return {
    write: (path: string, text: string): TraceOp => ({ op: 'write', path: at(path), bytes: bytesOf(text) }),
    fsync: (path: string): TraceOp => ({ op: 'fsync', path: at(path) }),
    syncFolder: (path = '.'): TraceOp => ({ op: 'fsync-directory', path: at(path) }),
    mkdir: (path: string): TraceOp => ({ op: 'mkdir', path: at(path) }),
    link: (source: string, path: string): TraceOp => ({ op: 'link', path: at(path), source: at(source) }),
    rename: (source: string, path: string): TraceOp => ({ op: 'rename', path: at(path), source: at(source) }),
    unlink: (path: string): TraceOp => ({ op: 'unlink', path: at(path) }),
    rmdir: (path: string): TraceOp => ({ op: 'rmdir', path: at(path) }),
  };
}

type Ops = ReturnType<typeof opsIn>;

const FOLDER = '<folder>';

describe('rule 1, durable stays', () => {
  it("makes a file's bytes durable with an fsync after its write: the last fsynced write, never the base bytes", () => {
    const { root, base } = makeBaseTree({ a: 'base' });
    const { write, fsync } = opsIn(root);
    const ops = [write('a', 'one'), fsync('a')];
    expect(statesAt(base, ops, 1)).toEqual(
      sorted([{ a: 'base' }, { a: '' }, { a: 'o' }, { a: '\0\0\0' }, { a: 'one' }]),
    );
    expect(statesAt(base, ops)).toEqual([{ a: 'one' }]);
  });

  type EntryCase = {
    entry: string;
    files?: Record<string, string>;
    folders?: string[];
    ops: (ops: Ops) => TraceOp[];
    synced: string;
    before: Shown[];
    after: Shown[];
  };
  it.each<EntryCase>([
    {
      entry: 'a mkdir',
      ops: ({ mkdir }) => [mkdir('d')],
      synced: '.',
      before: [{}, { d: FOLDER }],
      after: [{ d: FOLDER }],
    },
    {
      entry: 'a write that created the file',
      ops: ({ write, fsync }) => [write('a', 'x'), fsync('a')],
      synced: '.',
      before: [{}, { a: 'x' }],
      after: [{ a: 'x' }],
    },
    {
      entry: 'a link',
      files: { t: 'x' },
      ops: ({ link }) => [link('t', 'a')],
      synced: '.',
      before: [{ t: 'x' }, { a: 'x', t: 'x =a' }],
      after: [{ a: 'x', t: 'x =a' }],
    },
    {
      entry: "a rename's new name (its folder synced, the old one not)",
      folders: ['from', 'to'],
      files: { 'from/f': 'x' },
      ops: ({ rename }) => [rename('from/f', 'to/f')],
      synced: 'to',
      before: [
        { from: FOLDER, 'from/f': 'x', to: FOLDER },
        { from: FOLDER, 'from/f': 'x', to: FOLDER, 'to/f': 'x =from/f' },
        { from: FOLDER, to: FOLDER, 'to/f': 'x' },
      ],
      after: [
        { from: FOLDER, 'from/f': 'x', to: FOLDER, 'to/f': 'x =from/f' },
        { from: FOLDER, to: FOLDER, 'to/f': 'x' },
      ],
    },
    {
      entry: "a rename's removal of its old name (its folder synced, the new one not)",
      folders: ['from', 'to'],
      files: { 'from/f': 'x' },
      ops: ({ rename }) => [rename('from/f', 'to/f')],
      synced: 'from',
      before: [
        { from: FOLDER, 'from/f': 'x', to: FOLDER },
        { from: FOLDER, 'from/f': 'x', to: FOLDER, 'to/f': 'x =from/f' },
        { from: FOLDER, to: FOLDER, 'to/f': 'x' },
      ],
      // Durable removal of the old name forces the new one (rule 3).
      after: [{ from: FOLDER, to: FOLDER, 'to/f': 'x' }],
    },
    {
      entry: 'an unlink',
      files: { a: 'x' },
      ops: ({ unlink }) => [unlink('a')],
      synced: '.',
      before: [{}, { a: 'x' }],
      after: [{}],
    },
    {
      entry: 'an rmdir',
      folders: ['d'],
      ops: ({ rmdir }) => [rmdir('d')],
      synced: '.',
      before: [{}, { d: FOLDER }],
      after: [{}],
    },
  ])(
    'makes $entry durable with an fsync-directory of the folder that holds it, after it',
    ({ files, folders, ops, synced, before, after }) => {
      const { root, base } = makeBaseTree(files, folders);
      const trace = ops(opsIn(root));
      expect(statesAt(base, trace)).toEqual(sorted(before));
      expect(statesAt(base, [...trace, opsIn(root).syncFolder(synced)])).toEqual(sorted(after));
    },
  );

  type NoBarrierCase = { barrier: string; folders?: string[]; ops: (ops: Ops) => TraceOp[]; states: Shown[] };
  it.each<NoBarrierCase>([
    {
      barrier: 'an fsync of the file',
      ops: ({ write, fsync }) => [write('a', 'x'), fsync('a')],
      states: [{}, { a: 'x' }],
    },
    {
      barrier: 'an fsync-directory of the new folder itself',
      ops: ({ mkdir, syncFolder }) => [mkdir('d'), syncFolder('d')],
      states: [{}, { d: FOLDER }],
    },
    {
      barrier: 'an fsync-directory of a sibling folder',
      folders: ['other'],
      ops: ({ write, fsync, syncFolder }) => [write('a', 'x'), fsync('a'), syncFolder('other')],
      states: [{ other: FOLDER }, { a: 'x', other: FOLDER }],
    },
    {
      barrier: 'an fsync-directory of the folder above',
      folders: ['d'],
      ops: ({ write, fsync, syncFolder }) => [write('d/f', 'x'), fsync('d/f'), syncFolder('.')],
      states: [{ d: FOLDER }, { d: FOLDER, 'd/f': 'x' }],
    },
    {
      barrier: 'an fsync-directory of the folder before the entry',
      ops: ({ write, fsync, syncFolder }) => [syncFolder('.'), write('a', 'x'), fsync('a')],
      states: [{}, { a: 'x' }],
    },
  ])('does not make a new entry durable with $barrier', ({ folders, ops, states }) => {
    const { root, base } = makeBaseTree({}, folders);
    expect(statesAt(base, ops(opsIn(root)))).toEqual(sorted(states));
  });
});

describe('rule 2, after the last barrier any subset is lost', () => {
  it('keeps or loses each name independently of the others and of their order', () => {
    const { root, base } = makeBaseTree();
    const { write, fsync } = opsIn(root);
    const ops = [write('a', 'x'), fsync('a'), write('b', 'y'), fsync('b')];
    // {b} without {a}: the later entry reached the disk, the earlier did not.
    expect(statesAt(base, ops)).toEqual(sorted([{}, { a: 'x' }, { b: 'y' }, { a: 'x', b: 'y' }]));
  });

  it('shows a name as any of its entries after its durable one, never one before it', () => {
    const { root, base } = makeBaseTree({ a: 'base' });
    const { write, fsync, unlink, syncFolder } = opsIn(root);
    const ops = [unlink('a'), syncFolder(), write('a', 'one'), fsync('a'), unlink('a'), write('a', 'two'), fsync('a')];
    expect(statesAt(base, ops)).toEqual(sorted([{}, { a: 'one' }, { a: 'two' }]));
    expect(statesAt(base, [...ops, syncFolder()])).toEqual([{ a: 'two' }]);
  });
});

describe('rule 3, a rename is atomic', () => {
  it('shows the target old or new, never neither nor a mix; the source may stay as a second name', () => {
    const { root, base } = makeBaseTree({ data: 'old', temp: 'new' });
    const { rename } = opsIn(root);
    expect(statesAt(base, [rename('temp', 'data')])).toEqual(
      sorted([{ data: 'old', temp: 'new' }, { data: 'new', temp: 'new =data' }, { data: 'new' }]),
    );
  });

  it('shows a renamed folder, with its entries, under exactly one of its names', () => {
    const { root, base } = makeBaseTree({ 'd/f': 'x' }, ['d']);
    const { rename } = opsIn(root);
    expect(statesAt(base, [rename('d', 'e')])).toEqual(
      sorted([
        { d: FOLDER, 'd/f': 'x' },
        { e: FOLDER, 'e/f': 'x' },
      ]),
    );
  });

  it('never leaves the renamed file without a name when a later entry at its old name reached the disk', () => {
    const { root, base } = makeBaseTree({ a: 'old' });
    const { rename, write, fsync } = opsIn(root);
    const ops = [rename('a', 'b'), write('a', 'new'), fsync('a')];
    // A new `a` on disk means the old `a` is gone from it: then `b` holds the old file, as when the old name shows the rename itself.
    expect(statesAt(base, ops)).toEqual(
      sorted([{ a: 'old' }, { a: 'old', b: 'old =a' }, { b: 'old' }, { a: 'new', b: 'old' }]),
    );
  });
});

describe('rule 4, unsynced bytes', () => {
  it('reads each write after the last fsynced one as empty, its first half, zeros or whole, even with the entry durable', () => {
    const { root, base } = makeBaseTree({ a: 'base' });
    const { write, fsync, syncFolder } = opsIn(root);
    const ops = [write('a', 'one'), fsync('a'), write('a', 'three'), write('a', 'seven'), syncFolder()];
    const contents = statesAt(base, ops).map((state) => state.a);
    expect(contents.sort()).toEqual(['', '\0\0\0\0\0', 'one', 'se', 'seven', 'th', 'three']);
  });

  it('reads a new file whose write was never fsynced as empty, its first half, zeros or whole', () => {
    const { root, base } = makeBaseTree();
    const { write, syncFolder } = opsIn(root);
    expect(
      statesAt(base, [write('a', 'hello'), syncFolder()])
        .map((state) => state.a)
        .sort(),
    ).toEqual(['', '\0\0\0\0\0', 'he', 'hello']);
  });

  it('keeps bytes fsynced before a link or a rename whole under the new name', () => {
    const { root, base } = makeBaseTree({}, ['staging']);
    const { write, fsync, link, rename, syncFolder } = opsIn(root);
    const staged = [write('staging/t', 'new'), fsync('staging/t')];
    expect(statesAt(base, [...staged, link('staging/t', 'data'), syncFolder()])).toEqual(
      sorted([
        { data: 'new', staging: FOLDER, 'staging/t': 'new =data' },
        { data: 'new', staging: FOLDER },
      ]),
    );
    expect(statesAt(base, [...staged, rename('staging/t', 'data'), syncFolder()])).toEqual(
      sorted([
        { data: 'new', staging: FOLDER, 'staging/t': 'new =data' },
        { data: 'new', staging: FOLDER },
      ]),
    );
  });
});

describe('rule 5, lost with its folder', () => {
  it('loses the durable entries of a folder whose own entry did not reach the disk', () => {
    const { root, base } = makeBaseTree();
    const { mkdir, write, fsync, syncFolder } = opsIn(root);
    const ops = [mkdir('d'), write('d/f', 'x'), fsync('d/f'), mkdir('d/e'), syncFolder('d')];
    expect(statesAt(base, ops)).toEqual(sorted([{}, { d: FOLDER, 'd/e': FOLDER, 'd/f': 'x' }]));
    expect(statesAt(base, [...ops, syncFolder()])).toEqual([{ d: FOLDER, 'd/e': FOLDER, 'd/f': 'x' }]);
  });
});

describe('the replay of a trace', () => {
  it('resolves each path when its op ran: a folder renamed later keeps its entries, and its new path reaches the same folder', () => {
    const { root, base } = makeBaseTree({}, ['staging']);
    const { mkdir, write, fsync, rename, syncFolder } = opsIn(root);
    const ops = [
      mkdir('staging/d'),
      write('staging/d/f', 'x'),
      fsync('staging/d/f'),
      rename('staging/d', 'service'),
      write('service/g', 'y'),
      fsync('service/g'),
      syncFolder('service'),
      syncFolder('staging'),
    ];
    expect(statesAt(base, ops)).toEqual([{ service: FOLDER, 'service/f': 'x', 'service/g': 'y', staging: FOLDER }]);
  });

  it('takes an mkdir of an existing folder and an unlink or rmdir of a missing name as changing nothing', () => {
    const { root, base } = makeBaseTree({}, ['d']);
    const { mkdir, unlink, rmdir } = opsIn(root);
    const points = allCrashStates(base, [mkdir('d'), unlink('a'), rmdir('e')]);
    expect(points.map(({ states }) => states.map(shownTree))).toEqual([
      [{ d: FOLDER }],
      [{ d: FOLDER }],
      [{ d: FOLDER }],
      [{ d: FOLDER }],
    ]);
  });

  it("writes a base file's bytes to every name of it: hard links of the base tree are one file", () => {
    const { root } = makeBaseTree({ a: 'base' });
    linkSync(join(root, 'a'), join(root, 'b'));
    const base = baseTree(root);
    const { write, fsync } = opsIn(root);
    expect(statesAt(base, [write('b', 'new'), fsync('b')])).toEqual([{ a: 'new', b: 'new =a' }]);
  });

  it.each<{ trace: string; ops: (ops: Ops, root: string) => TraceOp[]; point?: number; error: RegExp }>([
    {
      trace: 'a path outside the base tree',
      ops: (_, root) => [{ op: 'write', path: `${root}-elsewhere/a`, bytes: bytesOf('x') }],
      error: /outside the base tree/,
    },
    {
      trace: 'a rename without a source',
      ops: (_, root) => [{ op: 'rename', path: join(root, 'b') }],
      error: /has no source/,
    },
    { trace: 'an fsync of a missing name', ops: ({ fsync }) => [fsync('missing')], error: /does not exist/ },
    { trace: 'a link onto a taken name', ops: ({ link }) => [link('data', 'data')], error: /which exists/ },
    {
      trace: 'a write below a missing folder',
      ops: ({ write }) => [write('none/a', 'x')],
      error: /a folder above it does not exist/,
    },
    { trace: 'an rmdir of a file', ops: ({ rmdir }) => [rmdir('data')], error: /wrong kind of entry/ },
    { trace: 'a crash point past the end', ops: () => [], point: 1, error: /crash point 1 is not in 0\.\.0/ },
  ])('refuses $trace: it could not have run over the base', ({ ops, point, error }) => {
    const { root, base } = makeBaseTree({ data: 'old' });
    const trace = ops(opsIn(root), root);
    expect(() => crashStates(base, trace, point ?? trace.length)).toThrow(error);
  });
});

describe('the enumeration', () => {
  it('gives every crash point, the base tree before the first op and the op that ran last after each', () => {
    const { root, base } = makeBaseTree({ data: 'old' });
    const { write, fsync, syncFolder } = opsIn(root);
    const points = allCrashStates(base, [write('a', 'x'), fsync('a'), syncFolder()]);
    expect(points.map(({ point, after, states }) => [point, after?.op, states.length])).toEqual([
      [0, undefined, 1],
      [1, 'write', 4],
      [2, 'fsync', 2],
      [3, 'fsync-directory', 1],
    ]);
    expect(points[0]!.states.map(contentKey)).toEqual([contentKey(base)]);
  });

  it('lists a state once however many combinations leave it', () => {
    const { root, base } = makeBaseTree();
    const { write, fsync, unlink } = opsIn(root);
    // Two files of the same bytes under one name, and two ways to show nothing: 3 combinations, 2 states.
    const { states, combinations } = crashStates(
      base,
      [write('a', 'x'), fsync('a'), unlink('a'), write('a', 'x'), fsync('a')],
      5,
    );
    expect([combinations, sorted(states.map(shownTree))]).toEqual([3, sorted([{}, { a: 'x' }])]);
  });

  it('stops at the cap and says so, rather than dropping states silently', () => {
    const { root, base } = makeBaseTree();
    const { write, fsync } = opsIn(root);
    // Each fsynced file whose entry is not durable doubles the states: 3 files fill a cap of 8, 4 overflow it.
    const files = (count: number) =>
      Array.from({ length: count }, (_, index) => [write(`f${index}`, 'x'), fsync(`f${index}`)]).flat();
    const full = crashStates(base, files(3), 6, 8);
    expect([full.combinations, full.states.length, full.capped]).toEqual([8, 8, false]);
    const over = crashStates(base, files(4), 8, 8);
    expect([over.combinations, over.states.length, over.capped]).toEqual([8, 8, true]);
  });
});

// ---- Toy protocols, explored as packages/recovery/test/power-loss.ts explores the real ones. ----

/**
 * Runs `ops` on the real file system, telling `hooks` of each before its
 * system call, as private-files does: a write creates the file (O_EXCL),
 * an fsync-directory opens the folder read-only.
 */
function runToy(ops: readonly TraceOp[], hooks: TraceHooks): void {
  for (const op of ops) {
    hooks.beforeMutation({
      action: op.op,
      path: op.path,
      ...(op.source === undefined ? {} : { source: op.source }),
      ...(op.bytes === undefined ? {} : { bytes: op.bytes }),
    });
    if (op.op === 'write') writeFileSync(op.path, op.bytes!, { flag: 'wx', mode: 0o600 });
    else if (op.op === 'rename') renameSync(op.source!, op.path);
    else if (op.op === 'unlink') unlinkSync(op.path);
    else if (op.op === 'fsync' || op.op === 'fsync-directory') {
      const descriptor = openSync(op.path, 'r');
      try {
        fsyncSync(descriptor);
      } finally {
        closeSync(descriptor);
      }
    } else throw new Error(`the toy runner has no ${op.op}`);
  }
}

/** What `data` reads as on disk once `state` is written back there: its text, or 'missing'. */
function dataOnDisk(root: string, state: Tree): string {
  materialise(state);
  try {
    return readFileSync(join(root, 'data'), 'latin1');
  } catch (error) {
    if (isMissing(error)) return 'missing';
    throw error;
  }
}

/**
 * Records a toy replacement of `data` ('old' by 'new') in a fresh folder,
 * checks that the trace replays to what the run left, then writes every
 * crash state back to disk and reads `data`: the crash points at which it
 * is neither 'old' nor 'new', and what it then reads as.
 */
function explore(protocol: (ops: Ops) => TraceOp[]): { broken: Record<number, string[]>; last: string[] } {
  const { root, base } = makeBaseTree({ data: 'old' });
  const { hooks, ops } = recordTrace();
  runToy(protocol(opsIn(root)), hooks);
  const points = allCrashStates(base, ops);
  expect(
    points.map((point) => point.states.map(contentKey)).at(-1),
    'the trace replays to what the run left',
  ).toContain(contentKey(baseTree(root)));
  const broken: Record<number, string[]> = {};
  for (const { point, states, capped } of points) {
    expect(capped).toBe(false);
    const found = [...new Set(states.map((state) => dataOnDisk(root, state)))]
      .filter((text) => text !== 'old' && text !== 'new')
      .sort();
    if (found.length > 0) broken[point] = found;
  }
  return { broken, last: points.at(-1)!.states.map((state) => dataOnDisk(root, state)) };
}

describe('toy protocols: replace `data` so that a power loss leaves it old or new, whole', () => {
  it.each<{ protocol: string; ops: (ops: Ops) => TraceOp[]; broken: Record<number, string[]> }>([
    {
      protocol: 'rename the temp over it before fsyncing the temp',
      ops: ({ write, rename, fsync, syncFolder }) => [
        write('temp', 'new'),
        rename('temp', 'data'),
        fsync('data'),
        syncFolder(),
      ],
      // After the rename `data` may name the temp's file before its bytes reached the disk; the fsync after it comes too late for that point.
      broken: { 2: ['', '\0\0\0', 'n'] },
    },
    {
      protocol: 'unlink it, then write the new one in its place',
      ops: ({ unlink, write, fsync, syncFolder }) => [
        unlink('data'),
        write('data', 'new'),
        fsync('data'),
        syncFolder(),
      ],
      broken: { 1: ['missing'], 2: ['', '\0\0\0', 'missing', 'n'], 3: ['missing'] },
    },
  ])('is caught when it does: $protocol', ({ ops, broken }) => {
    const explored = explore(ops);
    expect(explored.broken).toEqual(broken);
    expect(explored.last).toEqual(['new']);
  });

  it('passes when it does not: write a temp, fsync it, rename it over, fsync the folder', () => {
    const explored = explore(({ write, fsync, rename, syncFolder }) => [
      write('temp', 'new'),
      fsync('temp'),
      rename('temp', 'data'),
      syncFolder(),
    ]);
    expect(explored.broken).toEqual({});
    expect(explored.last).toEqual(['new']);
  });
});
