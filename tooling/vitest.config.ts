import { defineConfig, mergeConfig } from 'vitest/config';
import shared from './vitest.shared.js';

// The repository scripts' own tests (the layer check).
export default mergeConfig(
  shared,
  defineConfig({ test: { root: import.meta.dirname, include: ['scripts/**/*.test.mjs'] } }),
);
