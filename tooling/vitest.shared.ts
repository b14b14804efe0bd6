import { defineConfig } from 'vitest/config';

/**
 * The one vitest configuration every package extends. Tests touch the real
 * file system and spawn real processes, so each file runs in its own forked
 * process and timeouts are generous: a test fails on its assertions, never on
 * the speed of a shared machine.
 */
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
