import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
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

  it('leaves the folder absent or whole when the writer is killed before any step, and sweepStaging removes the rest', async () => {
    const dryRun = prepared();
    const dry = spawnWriter({ root: dryRun.root, operations: [{ op: 'createFolder', path: dryRun.target, files: CONTENTS }] });
    expect((await dry.closed).code).toBe(0);
    const total = writerMessages(dry, 'step').length;
    expect(total).toBe(8);
    const outcomes: string[] = [];
    for (let crashAt = 1; crashAt <= total; crashAt += 1) {
      const { root, files, parent, target } = prepared();
      const writer = spawnWriter({
        root,
        operations: [{ op: 'createFolder', path: target, files: CONTENTS }],
        stop: { how: 'kill', at: crashAt },
      });
      expect((await writer.closed).signal).toBe('SIGKILL');
      const renamed = crashAt > 7; // step 7 is the rename
      expect({ crashAt, outcome: outcomeOf(target) }).toEqual({ crashAt, outcome: renamed ? 'whole' : 'absent' });
      expect(readdirSync(parent)).toEqual(renamed ? ['service'] : []);
      const swept = files.sweepStaging();
      expect(swept.kept).toEqual([]);
      expect(readdirSync(join(root, STAGING_FOLDER))).toEqual([]);
      outcomes.push(outcomeOf(target));
    }
    expect(outcomes.filter((outcome) => outcome === 'partial')).toEqual([]);
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
