import type { KnipConfig } from 'knip';

// The entries knip cannot find by following imports from package.json (its
// plugins already add the vitest, eslint and changesets files): the sources
// behind `dist/` commands, since the build's outDir is only in
// tsconfig.build.json and knip cannot map dist/ back to src/; and the
// child-process fixtures, which tests spawn by path and never import.
const library = 'src/index.ts';
const tests = 'src/**/*.test.ts';
const fixtures = 'test/fixtures/*.mjs';

export default {
  $schema: 'https://unpkg.com/knip@6/schema.json',
  workspaces: {
    '.': { entry: ['tooling/scripts/*.mjs'] },
    // A package placed later starts with the common shape.
    'packages/*': { entry: [library, tests] },
    // `pnpm bench` runs dist/bench.js; each worker runs in a child, started by path. It counts a cycle's
    // system calls with the system's `strace`, which no npm package provides.
    'packages/bench': { entry: [library, tests, 'src/bench.ts', 'src/*-worker.ts'], ignoreBinaries: ['strace'] },
    // `leasehold` is src/bin.ts, bundled by rolldown.config.ts (knip reads it) into dist/leasehold.cjs. The tests read listening sockets with the system's `ss`.
    // @leasehold/etcd is imported by no file of the command, but the bundle inlines @leasehold/state-home and keeps its
    // `import('@leasehold/etcd')` outside, so it is resolved from the command's own folder: it must be the command's dependency.
    'packages/cli': {
      entry: [library, tests, fixtures, 'src/bin.ts'],
      ignoreBinaries: ['ss'],
      ignoreDependencies: ['@leasehold/etcd'],
    },
    // Its folder-mark tests make a FIFO with the system's `mkfifo`, as private-files' do.
    'packages/coordination': { entry: [library, tests, 'test/process-fixtures/*.mjs'], ignoreBinaries: ['mkfifo'] },
    'packages/etcd': { entry: [library, tests, fixtures] },
    // Their tests make FIFOs with the system's `mkfifo`, which no npm package provides.
    // `verifyFileSystem` starts dist/verify-fs-worker.js in each racing child, by path.
    'packages/private-files': {
      entry: [library, tests, fixtures, 'src/verify-fs-worker.ts'],
      ignoreBinaries: ['mkfifo'],
    },
    'packages/recovery': { entry: [library, tests, fixtures], ignoreBinaries: ['mkfifo'] },
    'packages/registry': { entry: [library, tests, fixtures] },
    // Its mounts are unmounted with the system's `umount`, which no npm package provides.
    'packages/test-utils': { entry: [library, tests, 'fixtures/*.mjs'], ignoreBinaries: ['umount'] },
    'packages/transport': { entry: [library, tests, fixtures] },
    // An application: `pnpm start` runs dist/daemon.js.
    'examples/*': { entry: ['src/daemon.ts', tests] },
  },
} satisfies KnipConfig;
