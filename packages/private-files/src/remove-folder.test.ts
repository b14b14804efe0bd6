import { readdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bytesOf, cleanUp } from '@leasehold/test-utils';
import { makeRoot, namesIn, unchangedCodeOf } from '../test/helpers.js';
import { PrivateFiles, STAGING_FOLDER, type FileSnapshot, type MutationStep } from './index.js';

afterEach(cleanUp);

const CONTENTS = { 'format.json': bytesOf('{"format":1}'), 'config.json': bytesOf('{"config":"a longer document"}') };

/** A root with `parent/service` published by createFolder, and the snapshots of its files. */
function published(hooks?: { beforeMutation: (step: MutationStep) => void }) {
  const root = makeRoot();
  const files = new PrivateFiles(root, hooks === undefined ? {} : { hooks });
  const parent = join(root, 'parent');
  new PrivateFiles(root).directory(parent, true);
  const target = join(parent, 'service');
  new PrivateFiles(root).createFolder(target, CONTENTS);
  const snapshots = (): Record<string, FileSnapshot> =>
    Object.fromEntries(Object.keys(CONTENTS).map((name) => [name, new PrivateFiles(root).read(join(target, name))!]));
  return { root, files, parent, target, expected: snapshots() };
}

// The mutating steps of removeFolder of `parent/service`, as shownSteps shows them: the list the hook test below checks.
const REMOVE_FOLDER_STEPS = [
  'remove-folder rename .staging/<staged> from parent/service',
  'remove-folder fsync-directory parent',
  'remove-folder unlink .staging/<staged>/config.json',
  'remove-folder unlink .staging/<staged>/format.json',
  'remove-folder rmdir .staging/<staged>',
];

/** Steps as `operation action path [from source]`, relative to the root, the staged folder (a `.dir` in staging) as `<staged>`. */
function shownSteps(steps: readonly MutationStep[], root: string): string[] {
  const shownPath = (path: string) =>
    relative(root, path).replace(/^\.staging\/[^/]+\.dir(?=\/|$)/, '.staging/<staged>');
  return steps.map(
    ({ operation, action, path, source }) =>
      `${operation} ${action} ${shownPath(path)}${source === undefined ? '' : ` from ${shownPath(source)}`}`,
  );
}

/** removeFolder with EIO thrown before step `failAt`: the folder is whole in place, or gone from it. */
function failedAt(failAt: number): void {
  const reached: MutationStep[] = [];
  const { root, files, parent, target, expected } = published({
    beforeMutation: (step) => {
      reached.push({ ...step });
      if (reached.length === failAt) throw Object.assign(new Error('injected EIO'), { code: 'EIO' });
    },
  });
  let thrown = false;
  try {
    files.removeFolder(target, expected);
  } catch {
    thrown = true;
  }
  expect(shownSteps(reached, root).slice(0, failAt)).toEqual(REMOVE_FOLDER_STEPS.slice(0, failAt));
  const names = namesIn(target);
  if (failAt === 1) {
    expect({ failAt, thrown, names }).toEqual({ failAt, thrown: true, names: ['config.json', 'format.json'] });
  } else {
    // After the rename the folder is gone from its place; a failure before the parent fsync is reported.
    expect({ failAt, thrown, names, parent: readdirSync(parent) }).toEqual({
      failAt,
      thrown: failAt === 2,
      names: undefined,
      parent: [],
    });
  }
  // Whatever is left in staging names this live writer: a later sweep removes it once the writer is gone.
  expect(files.stagingEntries().every((entry) => entry.writer === 'live')).toBe(true);
  expect(readdirSync(join(root, STAGING_FOLDER)).length).toBeLessThanOrEqual(1);
}

describe('removeFolder', () => {
  it('unpublishes a folder holding exactly the expected files, leaving no staging leftover', () => {
    const { root, files, parent, target, expected } = published();
    files.removeFolder(target, expected);
    expect(readdirSync(parent)).toEqual([]);
    expect(readdirSync(join(root, STAGING_FOLDER))).toEqual([]);
  });

  it('is a compare-and-swap: a changed file, another name or an absent folder is conflict, and nothing changes', () => {
    const { root, files, target, expected } = published();
    const fewer = { 'format.json': expected['format.json']! };
    expect(unchangedCodeOf(root, () => files.removeFolder(target, fewer))).toBe('conflict');
    writeFileSync(join(target, 'extra.json'), '{}', { mode: 0o600 });
    expect(unchangedCodeOf(root, () => files.removeFolder(target, expected))).toBe('conflict');
    const other = published();
    // Same bytes rewritten: another incarnation of the file, so another stamp.
    const rewritten = new PrivateFiles(other.root).read(join(other.target, 'config.json'))!;
    new PrivateFiles(other.root).replace(join(other.target, 'config.json'), rewritten, CONTENTS['config.json']);
    expect(unchangedCodeOf(other.root, () => other.files.removeFolder(other.target, other.expected))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.removeFolder(join(root, 'parent', 'missing'), expected))).toBe('conflict');
  });

  it('makes every mutating step through the hook, in order: the rename into staging, the parent fsync, then the staged copy', () => {
    const steps: MutationStep[] = [];
    const { root, files, parent, target, expected } = published({ beforeMutation: (step) => steps.push({ ...step }) });
    files.removeFolder(target, expected);
    expect(readdirSync(join(root, STAGING_FOLDER))).toEqual([]);
    const staged = (path: string) => path.replace(/\/\.staging\/[^/]+\.dir/, '/.staging/<staged>');
    // The rename reports like every other: `path` where the folder goes (its staged name), `source` the folder.
    const shown = steps.map(
      ({ action, path, source }) => `${action} ${staged(path)}${source === undefined ? '' : ` from ${source}`}`,
    );
    expect(shown).toEqual([
      `rename ${root}/.staging/<staged> from ${target}`,
      `fsync-directory ${parent}`,
      `unlink ${root}/.staging/<staged>/config.json`,
      `unlink ${root}/.staging/<staged>/format.json`,
      `rmdir ${root}/.staging/<staged>`,
    ]);
    expect(new Set(steps.map((step) => step.operation))).toEqual(new Set(['remove-folder']));
  });

  // One test per failing step (each a fresh root), so that each names its point and runs alone.
  describe('leaves the folder whole or gone when any step fails, never a half-emptied folder in place', () => {
    for (const failAt of REMOVE_FOLDER_STEPS.map((_, index) => index + 1)) {
      it(`EIO before step ${failAt}: ${REMOVE_FOLDER_STEPS[failAt - 1]}`, () => failedAt(failAt));
    }
  });
});

describe('entries with a pattern', () => {
  it('admits every name a pattern matches, and still refuses any other name', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const folder = join(root, 'folder');
    files.directory(folder, true);
    writeFileSync(join(folder, 'takeover-1.lock'), 'x', { mode: 0o600 });
    writeFileSync(join(folder, 'roots.json'), 'x', { mode: 0o600 });
    expect(files.entries(folder, ['roots.json', /^takeover-[0-9]+\.lock$/])).toEqual(['roots.json', 'takeover-1.lock']);
    writeFileSync(join(folder, 'takeover-x.lock'), 'x', { mode: 0o600 });
    expect(unchangedCodeOf(root, () => files.entries(folder, ['roots.json', /^takeover-[0-9]+\.lock$/]))).toBe(
      'refused',
    );
  });
});
