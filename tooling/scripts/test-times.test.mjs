import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readRuns, report } from './test-times.mjs';

const roots = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A repository whose packages left these runs. */
function repositoryWith(runs) {
  const root = mkdtempSync(join(tmpdir(), 'test-times-'));
  roots.push(root);
  for (const run of runs) {
    mkdirSync(join(root, 'packages', run.package), { recursive: true });
    writeFileSync(join(root, 'packages', run.package, '.test-times.json'), JSON.stringify(run));
  }
  mkdirSync(join(root, 'packages', 'no-tests'), { recursive: true });
  return root;
}

const test = (name, durationMs, timeoutMs = 120_000) => ({
  file: 'src/a.test.ts',
  name,
  state: 'passed',
  durationMs,
  timeoutMs,
});

describe('the test times report', () => {
  it('lists each package by wall time and the ten slowest tests, each against its bound', () => {
    const tests = Array.from({ length: 12 }, (_, index) => test(`case ${index}`, 1000 * (index + 1)));
    const repository = repositoryWith([
      { package: 'fast', wallMs: 2_000, tests: [test('quick', 5)] },
      { package: 'slow', wallMs: 90_000, tests },
    ]);
    const lines = report(readRuns(repository));
    expect(lines[0]).toBe('test times: 2 packages, 13 tests');
    expect(lines.slice(1, 3)).toEqual([
      expect.stringMatching(/^ {2}slow +90\.0 s {2}12 tests$/),
      expect.stringMatching(/^ {2}fast +2\.0 s {2}1 tests$/),
    ]);
    const slowest = lines.slice(4, 14);
    expect(slowest).toHaveLength(10);
    expect(slowest[0]).toMatch(/12\.0 s \/ 120\.0 s +10% {2}slow src\/a\.test\.ts > case 11$/);
    expect(slowest[9]).toMatch(/3\.0 s \/ 120\.0 s/);
    expect(lines.at(-1)).toBe('no test above a third of its bound');
  });

  it('marks a test above a third of its bound, and counts them', () => {
    const repository = repositoryWith([
      {
        package: 'p',
        wallMs: 60_000,
        tests: [test('near', 41_000), test('own bound', 5_000, 10_000), test('fine', 39_000)],
      },
    ]);
    const lines = report(readRuns(repository));
    expect(lines.filter((line) => line.includes('NEAR ITS BOUND'))).toEqual([
      expect.stringContaining('> near'),
      expect.stringContaining('> own bound'),
    ]);
    expect(lines.at(-1)).toBe('2 test(s) above a third of their bound: split them');
  });
});
