import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  codeBlocks,
  exportsMissingFromReadme,
  markdownSection,
  namesMissingFrom,
  publicNames,
  readmeExample,
  runReadmeExample,
} from './index.js';

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));
const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** A package folder `@scratch/example` with this README and a built entry point. */
function scratchPackage(readme: string): string {
  const folder = mkdtempSync(join(tmpdir(), 'leasehold-package-checks-'));
  folders.push(folder);
  writeFileSync(
    join(folder, 'package.json'),
    JSON.stringify({ name: '@scratch/example', type: 'module', exports: './dist/index.js' }),
  );
  mkdirSync(join(folder, 'dist'));
  writeFileSync(join(folder, 'dist', 'index.js'), 'export const answer = 42;\n');
  writeFileSync(join(folder, 'README.md'), readme);
  return folder;
}

const EXAMPLE =
  "```ts example\nimport { answer } from '@scratch/example';\nconst shown: number = answer;\nconsole.log(shown);\n```\n";

describe('the package checks', () => {
  it('name exactly what this package exports, and its README names each', () => {
    expect(publicNames(PACKAGE)).toEqual([
      'EXAMPLE_INFO',
      'ExampleOptions',
      'ExampleRun',
      'PublicDeclaration',
      'codeBlocks',
      'exampleAsModule',
      'exportsMissingFromReadme',
      'markdownSection',
      'namesMissingFrom',
      'publicDeclarations',
      'publicNames',
      'readmeExample',
      'runReadmeExample',
    ]);
    expect(exportsMissingFromReadme(PACKAGE)).toEqual([]);
  });

  it('count a name as shown only in a code span or block', () => {
    const readme = 'Plain publicNames here; `shownInSpan(x)` there.\n```ts\nshownInBlock()\n```\n';
    expect(namesMissingFrom(readme, ['publicNames', 'shownInSpan', 'shownInBlock'])).toEqual(['publicNames']);
  });

  it('run the one example as written, importing the package by name', async () => {
    const run = await runReadmeExample({ packageDir: scratchPackage(`# Example\n\n${EXAMPLE}`) });
    expect(run).toMatchObject({ code: 0, stdout: '42\n' });
  });

  it('refuse a README with no example, or two', () => {
    expect(() => readmeExample(join(scratchPackage('# none\n'), 'README.md'))).toThrow(
      /exactly one ```ts example block, found 0/,
    );
    expect(() => readmeExample(join(scratchPackage(EXAMPLE + EXAMPLE), 'README.md'))).toThrow(/found 2/);
  });

  it("read a section's code blocks of one info string, as printed, up to the next section", () => {
    const readme =
      '# P\n\n## Two\n\n```sh\nfirst\n```\n\n```ts\nskipped\n```\n\n```sh\nsecond\nline\n```\n\n## Next\n\n```sh\nlater\n```\n';
    const two = markdownSection(readme, '## Two');
    expect(two.startsWith('\n## Two\n')).toBe(true);
    expect(codeBlocks(two, 'sh')).toEqual(['first\n', 'second\nline\n']);
    expect(codeBlocks(readme, 'sh')).toEqual(['first\n', 'second\nline\n', 'later\n']);
    expect(() => markdownSection(readme, '## Three')).toThrow('no section ## Three');
  });

  it('let an example import only the package itself, as a strict install would', async () => {
    const readme = "```ts example\nimport { z } from 'zod';\nconsole.log(typeof z);\n```\n";
    const run = await runReadmeExample({ packageDir: scratchPackage(readme) });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('ERR_MODULE_NOT_FOUND');
  });
});
