import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sizeProblem, tarballProblems } from './check-packages.mjs';
import { unbuiltSources } from './require-built.mjs';

const folders = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function packageFolder(files) {
  const folder = mkdtempSync(join(tmpdir(), 'leasehold-tooling-'));
  folders.push(folder);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(folder, path, '..'), { recursive: true });
    writeFileSync(join(folder, path), text);
  }
  return folder;
}

const SHIPPED = ['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts'];

describe('what a tarball must hold', () => {
  it('passes the entry point, its types, the README and the LICENSE', () => {
    expect(tarballProblems(packageFolder({}), SHIPPED)).toEqual([]);
  });

  it('names each missing file, and CHANGELOG.md once the package has one', () => {
    const dir = packageFolder({ 'CHANGELOG.md': '# x\n' });
    expect(tarballProblems(dir, ['package.json', 'README.md', 'dist/index.js'])).toEqual([
      'LICENSE is missing',
      'dist/index.d.ts is missing',
      'CHANGELOG.md is missing',
    ]);
  });

  it('passes a command bundle and its chunks, and the CHANGELOG', () => {
    const files = [...SHIPPED, 'CHANGELOG.md', 'dist/leasehold.cjs', 'dist/leasehold/backend-x1.cjs', 'dist/bin.d.ts'];
    expect(tarballProblems(packageFolder({ 'CHANGELOG.md': '# x\n' }), files)).toEqual([]);
  });

  it('refuses what a user does not need: sources, source maps, anything outside dist', () => {
    const files = [
      ...SHIPPED,
      'src/index.ts',
      'dist/index.js.map',
      'dist/index.d.ts.map',
      'tsconfig.json',
      'dist/notes.txt',
    ];
    const why = "is not for users (only dist's .js and .d.ts, the README, CHANGELOG, LICENSE and package.json)";
    expect(tarballProblems(packageFolder({}), files)).toEqual([
      `src/index.ts ${why}`,
      `dist/index.js.map ${why}`,
      `dist/index.d.ts.map ${why}`,
      `tsconfig.json ${why}`,
      `dist/notes.txt ${why}`,
    ]);
  });

  it('refuses test files, test folders and fixtures', () => {
    const files = [
      ...SHIPPED,
      'src/codec.test.ts',
      'dist/codec.test.js.map',
      'test/helpers.ts',
      'fixtures/crasher.mjs',
    ];
    expect(tarballProblems(packageFolder({}), files)).toEqual([
      'src/codec.test.ts is a test file',
      'dist/codec.test.js.map is a test file',
      'test/helpers.ts is a test file',
      'fixtures/crasher.mjs is a test file',
    ]);
  });
});

describe("a README's tarball size", () => {
  const readme = (kib) => `## Install\n\nThe published tarball is ${kib} KiB: the built code and its types.\n`;

  it('passes a figure within 10 % of the tarball', () => {
    expect(sizeProblem(readme('40.0'), 40 * 1024)).toBeUndefined();
    expect(sizeProblem(readme('36.5'), 40 * 1024)).toBeUndefined();
    expect(sizeProblem(readme('43.9'), 40 * 1024)).toBeUndefined();
  });

  it('refuses a figure off by more, and a README without one, naming the figure to write', () => {
    expect(sizeProblem(readme('35.9'), 40 * 1024)).toBe(
      'its README says 35.9 KiB, the published tarball is 40.0 KiB: write 40.0',
    );
    expect(sizeProblem('## Install\n', 40 * 1024)).toBe(
      'its README does not say its size: add "The published tarball is 40.0 KiB." to its Install section',
    );
  });
});

describe('the prepack guard', () => {
  it('passes a package whose every source is built, ignoring tests and declarations', () => {
    const dir = packageFolder({ 'src/a.ts': '', 'src/a.test.ts': '', 'src/types.d.ts': '', 'src/deep/b.ts': '' });
    for (const file of ['dist/a.js', 'dist/deep/b.js']) {
      mkdirSync(join(dir, file, '..'), { recursive: true });
      writeFileSync(join(dir, file), '');
    }
    expect(unbuiltSources(dir)).toEqual([]);
  });

  it('refuses an unbuilt clone and a source edited after its build', () => {
    const dir = packageFolder({ 'src/a.ts': '', 'src/b.ts': '', 'dist/b.js': '' });
    const past = new Date(Date.now() - 60_000);
    utimesSync(join(dir, 'dist/b.js'), past, past);
    expect(unbuiltSources(dir)).toEqual(['dist/a.js is missing', 'src/b.ts is newer than its build']);
  });
});
