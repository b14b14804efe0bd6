import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tarballProblems } from './check-packages.mjs';
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

  it('refuses test files, test folders and fixtures', () => {
    const files = [
      ...SHIPPED,
      'src/codec.test.ts',
      'dist/codec.test.js.map',
      'test/helpers.ts',
      'fixtures/crasher.mjs',
      'src/codec.ts',
    ];
    expect(tarballProblems(packageFolder({}), files)).toEqual([
      'src/codec.test.ts is a test file',
      'dist/codec.test.js.map is a test file',
      'test/helpers.ts is a test file',
      'fixtures/crasher.mjs is a test file',
    ]);
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
