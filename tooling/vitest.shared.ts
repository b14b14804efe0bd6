import { defineConfig } from 'vitest/config';
import { TestTimesReporter } from './test-times-reporter.js';

/**
 * The one vitest configuration every package extends. Tests touch the real
 * file system and spawn real processes, so each file runs in its own forked
 * process.
 *
 * How much runs at once: `pnpm test` runs one package's tests at a time
 * (turbo `--concurrency=1`, see the root package.json), and inside it two
 * test files at once, one per core of the 2-core machines CI and the team
 * run on. Most of a test's time is fsync waits and its own child processes
 * (crash fixtures, racing writers, etcd members), which need a core of their
 * own to make progress; ten packages' suites side by side, two workers each,
 * starved each other until tests ran into their bounds.
 *
 * The bounds catch a hang, not a slow machine: a test fails on its
 * assertions. Every test stays far inside them (a test that enumerates crash
 * points is a table of cases, one each); `tooling/scripts/test-times.mjs`
 * prints the slowest after every run, and flags one above a third of its
 * bound.
 */
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 120_000,
    hookTimeout: 60_000,
    reporters: ['default', new TestTimesReporter()],
  },
});
