import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, relative } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bytesOf, cleanUp, modeOf, sha256Hex } from '@leasehold/test-utils';
import { makeRoot, namesIn, spawnWriter, unchangedCodeOf, writerMessages } from '../test/helpers.js';
import { PrivateFiles, STAGING_FOLDER, type MutationStep } from './index.js';

afterEach(cleanUp);

const CONTENTS = { 'format.json': '{"format":1}', 'config.json': '{"config":"a longer document"}' };

function encoded(contents: Record<string, string>): Record<string, Uint8Array> {
  return Object.fromEntries(Object.entries(contents).map(([name, text]) => [name, bytesOf(text)]));
}

/** A root whose `parent` folder and staging folder exist; the target is `parent/service`. */
function prepared(): { root: string; files: PrivateFiles; parent: string; target: string } {
  const root = makeRoot();
  const files = new PrivateFiles(root);
  const parent = join(root, 'parent');
  files.directory(parent, true);
  files.directory(join(root, STAGING_FOLDER), true);
  return { root, files, parent, target: join(parent, 'service') };
}

/** Absent, or every file whole: a staged folder is published complete or not at all. */
function outcomeOf(target: string): 'absent' | 'whole' | 'partial' {
  const names = namesIn(target);
  if (names === undefined) return 'absent';
  const whole =
    names.join(',') === Object.keys(CONTENTS).sort().join(',') &&
    Object.entries(CONTENTS).every(([name, text]) => readFileSync(join(target, name), 'utf8') === text);
  return whole ? 'whole' : 'partial';
}

// The mutating steps of createFolder of `parent/service`, as a writer in a child reports them (see
// shownSteps): the same list the hook test above checks in this process.
const CREATE_FOLDER_STEPS = [
  'create-folder mkdir .staging/<staged>',
  'create-folder write .staging/<staged>/format.json',
  'create-folder fsync .staging/<staged>/format.json',
  'create-folder write .staging/<staged>/config.json',
  'create-folder fsync .staging/<staged>/config.json',
  'create-folder fsync-directory .staging/<staged>',
  'create-folder rename parent/service',
  'create-folder fsync-directory parent',
];
const RENAMED_AT = CREATE_FOLDER_STEPS.indexOf('create-folder rename parent/service') + 1;

/** Steps as `operation action path`, relative to the root, the staged folder (a `.dir` in staging) as `<staged>`. */
function shownSteps(steps: readonly MutationStep[], root: string): string[] {
  const shownPath = (path: string) =>
    relative(root, path).replace(/^\.staging\/[^/]+\.dir(?=\/|$)/, '.staging/<staged>');
  return steps.map(({ operation, action, path }) => `${operation} ${action} ${shownPath(path)}`);
}

/** The dry run: createFolder in a child, every step reported; it must be exactly CREATE_FOLDER_STEPS. */
async function dryRunInChild(): Promise<void> {
  const { root, target } = prepared();
  const dry = spawnWriter({ root, operations: [{ op: 'createFolder', path: target, files: CONTENTS }] });
  expect((await dry.closed).code).toBe(0);
  const steps = writerMessages(dry, 'step') as MutationStep[];
  expect(steps).toHaveLength(8);
  expect(shownSteps(steps, root)).toEqual(CREATE_FOLDER_STEPS);
}

/** A writer in a child, SIGKILLed before step `crashAt` of createFolder: absent or whole, before and after the sweep. */
async function killedAt(crashAt: number): Promise<void> {
  const { root, files, parent, target } = prepared();
  const writer = spawnWriter({
    root,
    operations: [{ op: 'createFolder', path: target, files: CONTENTS }],
    stop: { how: 'kill', at: crashAt },
  });
  expect((await writer.closed).signal).toBe('SIGKILL');
  expect(shownSteps(writerMessages(writer, 'step') as MutationStep[], root)).toEqual(
    CREATE_FOLDER_STEPS.slice(0, crashAt),
  );
  const renamed = crashAt > RENAMED_AT;
  const expected = renamed ? 'whole' : 'absent';
  expect({ crashAt, outcome: outcomeOf(target) }).toEqual({ crashAt, outcome: expected });
  expect(readdirSync(parent)).toEqual(renamed ? ['service'] : []);
  const swept = files.sweepStaging();
  expect(swept.kept).toEqual([]);
  expect(readdirSync(join(root, STAGING_FOLDER))).toEqual([]);
  // Never partial, after the sweep either: the sweep touches staging only.
  expect({ crashAt, afterSweep: outcomeOf(target) }).toEqual({ crashAt, afterSweep: expected });
}

describe('createFolder', () => {
  it('publishes the folder 0700 with its files 0600, readable through PrivateFiles, leaving staging empty', () => {
    const { root, files, target } = prepared();
    files.createFolder(target, encoded(CONTENTS));
    expect(modeOf(target)).toBe(0o700);
    expect(files.entries(target, Object.keys(CONTENTS))).toEqual(Object.keys(CONTENTS).sort());
    for (const [name, text] of Object.entries(CONTENTS)) {
      expect(modeOf(join(target, name))).toBe(0o600);
      expect(new TextDecoder().decode(files.read(join(target, name))?.bytes)).toBe(text);
    }
    expect(readdirSync(join(root, STAGING_FOLDER))).toEqual([]);
  });

  it('is exclusive: an existing folder, even an empty one, is conflict and nothing changes', () => {
    const { root, files, target } = prepared();
    mkdirSync(target, { mode: 0o700 });
    expect(unchangedCodeOf(root, () => files.createFolder(target, encoded(CONTENTS)))).toBe('conflict');
  });

  it('refuses a name that is not a plain file name, a file over the bound and a missing parent, changing nothing', () => {
    const { root, files, parent, target } = prepared();
    expect(unchangedCodeOf(root, () => files.createFolder(target, { '../escape': bytesOf('x') }))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.createFolder(target, { '.hidden': bytesOf('x') }))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.createFolder(target, { big: new Uint8Array(9) }, 8))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.createFolder(join(parent, 'missing', 'service'), encoded(CONTENTS)))).toBe(
      'refused',
    );
  });

  it('makes every mutating step through the hook, in order', () => {
    const { root, parent, target } = prepared();
    const steps: MutationStep[] = [];
    const files = new PrivateFiles(root, { hooks: { beforeMutation: (step) => steps.push({ ...step }) } });
    files.createFolder(target, encoded(CONTENTS));
    const staged = steps[0]!.path;
    expect(staged.startsWith(join(root, STAGING_FOLDER, '/'))).toBe(true);
    expect(staged.endsWith('.dir')).toBe(true);
    expect(steps.map(({ action, path }) => `${action} ${path.replace(staged, '<staged>')}`)).toEqual([
      'mkdir <staged>',
      'write <staged>/format.json',
      'fsync <staged>/format.json',
      'write <staged>/config.json',
      'fsync <staged>/config.json',
      'fsync-directory <staged>',
      `rename ${target}`,
      `fsync-directory ${parent}`,
    ]);
    expect(new Set(steps.map((step) => step.operation))).toEqual(new Set(['create-folder']));
  });

  // One test per crash point (each a fresh root and one child), so that each stays far inside its bound; the dry
  // run, which proves the step list every point relies on, is a test of its own.
  describe('leaves the folder absent or whole when the writer is killed before any step, and sweepStaging removes the rest', () => {
    it('the dry run reports exactly the steps written above', dryRunInChild);

    for (const crashAt of CREATE_FOLDER_STEPS.map((_, index) => index + 1)) {
      it(`killed before step ${crashAt}: ${CREATE_FOLDER_STEPS[crashAt - 1]}`, () => killedAt(crashAt));
    }
  });

  it('keeps a staged folder that holds something it did not stage', () => {
    const { root, files } = prepared();
    // Named as a dead writer's staged folder of this host (no process can have this pid)...
    const deadWriter = `2147483646.${sha256Hex(bytesOf(hostname())).slice(0, 16)}.-.${'0'.repeat(16)}.dir`;
    const foreign = join(root, STAGING_FOLDER, deadWriter);
    mkdirSync(foreign, { mode: 0o700 });
    mkdirSync(join(foreign, 'nested'), { mode: 0o700 });
    writeFileSync(join(foreign, 'file'), 'x', { mode: 0o600 });
    expect(files.stagingEntries().map((entry) => entry.writer)).toEqual(['absent']);
    // ...but holding a folder createFolder never stages: not ours to remove.
    expect(files.sweepStaging()).toEqual({ removed: [], kept: [deadWriter] });
    expect(namesIn(foreign)).toEqual(['file', 'nested']);
  });
});
