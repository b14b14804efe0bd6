// The power-loss tool of @leasehold/test-utils, tested here: its toy
// protocols are recorded through real private-files calls, and test-utils may
// not depend on private-files (the layer check), while this package
// dev-depends on test-utils.
import { lstatSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CRASH_STATE_CAP,
  allCrashStates,
  baseTree,
  bytesOf,
  cleanUp,
  crashStates,
  decodeTrace,
  encodeTrace,
  makeBaseTree,
  makeTemporaryFolder,
  materialise,
  recordTrace,
  shownTree,
  spawnChild,
  type ShownTree,
  type Tree,
  type TraceOp,
} from '@leasehold/test-utils';
import { PrivateFiles } from './index.js';

afterEach(cleanUp);

/** Every state of a crash after `point` ops, shown, sorted for comparison. */
function shownAt(base: Tree, ops: readonly TraceOp[], point = ops.length): ShownTree[] {
  const { states, capped } = crashStates(base, ops, point);
  expect(capped).toBe(false);
  return states.map(shownTree).sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
}

function write(path: string, text: string): TraceOp {
  return { op: 'write', path, bytes: bytesOf(text) };
}

describe('the persistence model', () => {
  it('leaves only the base tree before the first op', () => {
    const { root, base } = makeBaseTree({ data: 'old' });
    expect(shownAt(base, [write(join(root, 'a'), 'x')], 0)).toEqual([{ data: 'old' }]);
  });

  it('keeps a file whose data and entry were fsynced, whole', () => {
    const { root, base } = makeBaseTree();
    const a = join(root, 'a');
    const ops: TraceOp[] = [write(a, 'hello'), { op: 'fsync', path: a }, { op: 'fsync-directory', path: root }];
    expect(shownAt(base, ops)).toEqual([{ a: 'hello' }]);
  });

  it('lets an un-fsynced write read as empty, its first half, zeros or whole, even with its entry durable', () => {
    const { root, base } = makeBaseTree();
    const ops: TraceOp[] = [write(join(root, 'a'), 'hello'), { op: 'fsync-directory', path: root }];
    expect(shownAt(base, ops).map((state) => state.a)).toEqual(['', '\0\0\0\0\0', 'he', 'hello']);
  });

  it('may lose a new entry until its folder is fsynced, even with its data fsynced', () => {
    const { root, base } = makeBaseTree();
    const a = join(root, 'a');
    const ops: TraceOp[] = [write(a, 'hello'), { op: 'fsync', path: a }];
    expect(shownAt(base, ops)).toEqual([{ a: 'hello' }, {}]);
    expect(shownAt(base, [...ops, { op: 'fsync-directory', path: root }])).toEqual([{ a: 'hello' }]);
  });

  it('may lose an unlink until its folder is fsynced', () => {
    const { root, base } = makeBaseTree({ data: 'old' });
    const ops: TraceOp[] = [{ op: 'unlink', path: join(root, 'data') }];
    expect(shownAt(base, ops)).toEqual([{ data: 'old' }, {}]);
    expect(shownAt(base, [...ops, { op: 'fsync-directory', path: root }])).toEqual([{}]);
  });

  it('may lose a rename without the folder fsync, and shows the target old or new, never neither or a mix', () => {
    const { root, base } = makeBaseTree({ data: 'old' });
    const [temp, data] = [join(root, 'temp'), join(root, 'data')];
    const ops: TraceOp[] = [
      write(temp, 'new'),
      { op: 'fsync', path: temp },
      { op: 'rename', path: data, source: temp },
    ];
    // The temp's own entry was never made durable: it may be there, as a second name of what `data` shows.
    expect(shownAt(base, ops)).toEqual([
      { data: 'new', temp: 'new =data' },
      { data: 'new' },
      { data: 'old', temp: 'new' },
      { data: 'old' },
    ]);
    expect(shownAt(base, [...ops, { op: 'fsync-directory', path: root }])).toEqual([{ data: 'new' }]);
  });

  it('never keeps the removal of a renamed file without its new name: a durable old folder forces the new name', () => {
    const { root, base } = makeBaseTree({ data: 'old' }, ['staging']);
    const temp = join(root, 'staging', 'temp');
    const data = join(root, 'data');
    const ops: TraceOp[] = [
      write(temp, 'new'),
      { op: 'fsync', path: temp },
      { op: 'rename', path: data, source: temp },
      { op: 'fsync-directory', path: join(root, 'staging') },
    ];
    expect(shownAt(base, ops)).toEqual([{ data: 'new', staging: '<folder>' }]);
  });

  it('keeps data written and fsynced before a link whole under the new name', () => {
    const { root, base } = makeBaseTree({}, ['staging']);
    const temp = join(root, 'staging', 'temp');
    const ops: TraceOp[] = [
      write(temp, 'new'),
      { op: 'fsync', path: temp },
      { op: 'link', path: join(root, 'data'), source: temp },
    ];
    for (const state of shownAt(base, ops)) expect([undefined, 'new']).toContain(state.data);
    expect(shownAt(base, [...ops, { op: 'fsync-directory', path: root }]).map((state) => state.data)).toEqual([
      'new',
      'new',
    ]);
  });

  it('loses the entries of a folder whose own creation is not durable with it', () => {
    const { root, base } = makeBaseTree();
    const [folder, file] = [join(root, 'd'), join(root, 'd', 'f')];
    const ops: TraceOp[] = [
      { op: 'mkdir', path: folder },
      write(file, 'x'),
      { op: 'fsync', path: file },
      { op: 'fsync-directory', path: folder },
    ];
    expect(shownAt(base, ops)).toEqual([{ d: '<folder>', 'd/f': 'x' }, {}]);
  });

  it('moves a folder whole: never under two names, its entries kept by the folder, not the path', () => {
    const { root, base } = makeBaseTree({}, ['staging']);
    const [staged, service] = [join(root, 'staging', 'dir'), join(root, 'service')];
    const ops: TraceOp[] = [
      { op: 'mkdir', path: staged },
      write(join(staged, 'f'), 'x'),
      { op: 'fsync', path: join(staged, 'f') },
      { op: 'fsync-directory', path: staged },
      { op: 'rename', path: service, source: staged },
    ];
    expect(shownAt(base, ops)).toEqual([
      { service: '<folder>', 'service/f': 'x', staging: '<folder>' },
      { staging: '<folder>', 'staging/dir': '<folder>', 'staging/dir/f': 'x' },
      { staging: '<folder>' },
    ]);
  });

  it('gives every crash point, with the op that ran last', () => {
    const { root, base } = makeBaseTree();
    const ops: TraceOp[] = [
      write(join(root, 'a'), 'x'),
      { op: 'fsync', path: join(root, 'a') },
      { op: 'fsync-directory', path: root },
    ];
    const points = allCrashStates(base, ops);
    expect(points.map(({ point, after, states }) => [point, after?.op, states.length])).toEqual([
      [0, undefined, 1],
      [1, 'write', 4],
      [2, 'fsync', 2],
      [3, 'fsync-directory', 1],
    ]);
  });

  it('stops at the cap and says so, rather than dropping states silently', () => {
    const { root, base } = makeBaseTree();
    // Each fsynced file with an un-fsynced entry doubles the states: 12 files fill the cap exactly, 13 overflow it.
    const files = (count: number) =>
      Array.from({ length: count }, (_, index) => join(root, `f${index}`)).flatMap((path): TraceOp[] => [
        write(path, 'x'),
        { op: 'fsync', path },
      ]);
    const full = crashStates(base, files(12), 24);
    expect([full.combinations, full.states.length, full.capped]).toEqual([CRASH_STATE_CAP, CRASH_STATE_CAP, false]);
    const over = crashStates(base, files(13), 26);
    expect([over.combinations, over.capped]).toEqual([CRASH_STATE_CAP, true]);
  });

  it('refuses a trace that could not have run over its base', () => {
    const { root, base } = makeBaseTree({ data: 'old' });
    expect(() => crashStates(base, [write('/elsewhere/a', 'x')], 1)).toThrow(/outside the base tree/);
    expect(() => crashStates(base, [{ op: 'rename', path: join(root, 'data') }], 1)).toThrow(/has no source/);
    expect(() => crashStates(base, [{ op: 'fsync', path: join(root, 'missing') }], 1)).toThrow(/does not exist/);
    expect(() => crashStates(base, [{ op: 'link', path: join(root, 'data'), source: join(root, 'data') }], 1)).toThrow(
      /exists/,
    );
    expect(() => crashStates(base, [], 1)).toThrow(/crash point/);
  });
});

describe('traces', () => {
  it('are recorded from private-files steps, with sources and copies of the bytes', () => {
    const { root } = makeBaseTree({}, ['.staging']);
    const { hooks, ops } = recordTrace();
    const bytes = bytesOf('abc');
    new PrivateFiles(root, { hooks }).create(join(root, 'data'), bytes);
    bytes.fill(0);
    expect(
      ops.map(({ op, path, source, bytes: written }) => [
        op,
        path === join(root, 'data'),
        source !== undefined,
        written && Buffer.from(written).toString(),
      ]),
    ).toEqual([
      ['write', false, false, 'abc'],
      ['fsync', false, false, undefined],
      ['link', true, true, undefined],
      ['unlink', false, false, undefined],
      ['fsync-directory', false, false, undefined],
    ]);
  });

  it('survive JSON lines, bytes in base64, beside other lines; a broken trace line throws', () => {
    const ops: TraceOp[] = [
      write('/r/a', 'h\u00e9\0'),
      { op: 'rename', path: '/r/b', source: '/r/a' },
      { op: 'fsync-directory', path: '/r' },
    ];
    const lines = ['{"ready":true}', ...encodeTrace(ops).split('\n'), 'not json'];
    expect(decodeTrace(lines)).toEqual(ops);
    expect(decodeTrace(encodeTrace(ops))).toEqual(ops);
    expect(() => decodeTrace('{"trace":{"op":"truncate","path":"/r"}}')).toThrow(/not a trace line/);
  });
});

describe('materialise', () => {
  it('writes a state at its own root, replacing what is there, with its modes and hard links', () => {
    const { root } = makeBaseTree({ old: 'gone' });
    materialise({
      root,
      entries: {
        '.': { kind: 'folder', mode: 0o700 },
        d: { kind: 'folder', mode: 0o500 },
        'd/f': { kind: 'file', mode: 0o600, bytes: bytesOf('x'), inode: 'one' },
        g: { kind: 'file', mode: 0o600, bytes: bytesOf('x'), inode: 'one' },
        l: { kind: 'symlink', target: 'g' },
      },
    });
    expect(shownTree(baseTree(root))).toEqual({ d: '<folder>', 'd/f': 'x', g: 'x =d/f', l: '-> g' });
    expect(lstatSync(join(root, 'g')).nlink).toBe(2);
    expect(lstatSync(join(root, 'd')).mode & 0o777).toBe(0o500);
    expect(lstatSync(join(root, 'g')).mode & 0o777).toBe(0o600);
  });
});

/** The toy invariant: `data` is always whole, the old text or the new one. */
function dataWhole(state: Tree): boolean {
  const data = state.entries.data;
  return data?.kind === 'file' && ['old', 'new'].includes(Buffer.from(data.bytes).toString());
}

describe('the toy protocol: replace `data` by a temp renamed over it', () => {
  it('is caught without the temp fsync: some crash state has an empty or partial `data`', () => {
    const { root, base } = makeBaseTree({ data: 'old' });
    const temp = join(root, 'temp');
    const ops: TraceOp[] = [
      write(temp, 'new'),
      { op: 'rename', path: join(root, 'data'), source: temp },
      { op: 'fsync-directory', path: root },
    ];
    const broken = allCrashStates(base, ops).flatMap(({ states }) => states.filter((state) => !dataWhole(state)));
    // `data` names the temp's file from the rename on, whose bytes may not have reached the disk.
    expect(
      new Set(
        broken.map((state) => Buffer.from((state.entries.data as { bytes: Uint8Array }).bytes).toString('latin1')),
      ),
    ).toEqual(new Set(['', 'n', '\0\0\0']));
  });

  it('is clean with the temp fsync and the folder fsync: private-files replace, at every crash point', () => {
    const { root, base } = makeBaseTree({ data: 'old' });
    const files = new PrivateFiles(root);
    const { hooks, ops } = recordTrace();
    new PrivateFiles(root, { hooks }).replace(join(root, 'data'), files.read(join(root, 'data'))!, bytesOf('new'));
    const points = allCrashStates(base, ops);
    expect(points.every(({ states, capped }) => !capped && states.every(dataWhole))).toBe(true);
    // The last point is past the folder fsync: only the new text.
    expect(
      points.at(-1)!.states.map((state) => Buffer.from((state.entries.data as { bytes: Uint8Array }).bytes).toString()),
    ).toEqual(['new', 'new']);
  });

  it('is recorded in a child that is gone before its states are materialised at the same absolute root', async () => {
    const { root, base } = makeBaseTree({ data: 'old' });
    const script = join(makeTemporaryFolder('power-loss-child-'), 'replace.mjs');
    // The child imports both packages by the URLs this test resolves, and prints each op as it is recorded.
    writeFileSync(
      script,
      `const [files, utils] = await Promise.all([import(${JSON.stringify(import.meta.resolve('@leasehold/private-files'))}), import(${JSON.stringify(import.meta.resolve('@leasehold/test-utils'))})]);
const root = process.argv[2];
const { hooks } = utils.recordTrace((line) => process.stdout.write(line + '\\n'));
const path = root + '/data';
new files.PrivateFiles(root, { hooks }).replace(path, new files.PrivateFiles(root).read(path), new TextEncoder().encode('new'));
`,
    );
    const child = spawnChild(script, [root]);
    expect((await child.closed).code).toBe(0);
    const ops = decodeTrace(child.lines);
    expect(ops.map((op) => op.op)).toEqual(['mkdir', 'fsync-directory', 'write', 'fsync', 'rename', 'fsync-directory']);
    for (const { states } of allCrashStates(base, ops)) {
      for (const state of states) {
        materialise(state);
        expect(['old', 'new']).toContain(readFileSync(join(root, 'data'), 'utf8'));
        expect(shownTree(baseTree(root))).toEqual(shownTree(state));
      }
    }
  });
});
