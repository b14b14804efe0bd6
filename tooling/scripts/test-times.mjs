#!/usr/bin/env node
// After `pnpm test`: each package's wall time and the ten slowest tests, each
// against the bound it ran under, from the `.test-times.json` that every
// package's run leaves (tooling/test-times-reporter.ts). A test past a third
// of its bound is marked: on a busier machine it is the next to time out, so
// it is split (a table of cases) before it does.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const TIMES_FILE = '.test-times.json';
const SHOWN = 10;
/** A test above this share of its bound is too close to it. */
const NEAR = 1 / 3;

/** Every package's recorded run under `folders` (relative to the repository root). */
export function readRuns(repository, folders = ['packages', 'examples']) {
  return folders.flatMap((folder) => {
    const parent = join(repository, folder);
    if (!existsSync(parent)) return [];
    return readdirSync(parent).flatMap((name) => {
      const path = join(parent, name, TIMES_FILE);
      return existsSync(path) ? [JSON.parse(readFileSync(path, 'utf8'))] : [];
    });
  });
}

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

/** The report as lines: packages by wall time, then the slowest tests with their share of the bound. */
export function report(runs) {
  const tests = runs.flatMap((run) => run.tests.map((test) => ({ ...test, package: run.package })));
  const slowest = [...tests].sort((a, b) => b.durationMs - a.durationMs).slice(0, SHOWN);
  const near = tests.filter((test) => test.durationMs > test.timeoutMs * NEAR);
  return [
    `test times: ${runs.length} packages, ${tests.length} tests`,
    ...[...runs]
      .sort((a, b) => b.wallMs - a.wallMs)
      .map((run) => `  ${run.package.padEnd(16)} ${seconds(run.wallMs).padStart(9)}  ${run.tests.length} tests`),
    `the ${slowest.length} slowest tests (time / bound):`,
    ...slowest.map((test) => {
      const share = `${Math.round((100 * test.durationMs) / test.timeoutMs)}%`;
      return `  ${seconds(test.durationMs).padStart(9)} / ${seconds(test.timeoutMs)} ${share.padStart(4)}${test.durationMs > test.timeoutMs * NEAR ? ' NEAR ITS BOUND' : ''}  ${test.package} ${test.file} > ${test.name}`;
    }),
    near.length === 0
      ? 'no test above a third of its bound'
      : `${near.length} test(s) above a third of their bound: split them`,
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(report(readRuns(join(import.meta.dirname, '..', '..'))).join('\n'));
}
