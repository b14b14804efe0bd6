import { defineConfig } from 'rolldown';

// The `leasehold` command is started many times a day, by people, scripts and shell prompts, so its
// start-up is part of its contract. Node 20 loads an ES module graph file by file (zod alone is 95
// modules), and an ES entry point costs Node's ES loader even for `--version`. tsc builds the library
// as usual; this bundles the command alone into `dist/leasehold.cjs`, CommonJS, with each command in
// a chunk of its own so `--version` and `--help` load none of them. `@leasehold/etcd` stays outside:
// it is an ES module loaded by `import()` only for a state home that records etcd, from the
// installed package, with its client. That `import()` is @leasehold/state-home's, bundled here, so it
// resolves from this package's folder: @leasehold/etcd stays a dependency of the command itself.
export default defineConfig({
  input: { leasehold: 'dist/bin.js' },
  platform: 'node',
  external: [/^node:/, '@leasehold/etcd'],
  output: {
    dir: 'dist',
    format: 'cjs',
    entryFileNames: '[name].cjs',
    chunkFileNames: 'leasehold/[name]-[hash].cjs',
    dynamicImportInCjs: true,
    sourcemap: true,
  },
});
