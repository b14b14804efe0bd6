#!/usr/bin/env node
// The `prepack` guard of every public package: refuses to pack (and so to
// publish) a package whose `dist` is missing or older than its sources, so a
// clean, unbuilt clone can never ship a tarball with no code in it. It checks
// rather than builds: `attw --pack` packs while turbo runs other tasks that
// read `dist`, and a build here would delete it under them.
//
// Usage (from a package folder): node ../../tooling/scripts/require-built.mjs
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** Every source file of `folder` (tests excluded) with the `dist` file it builds to. */
function* sourcesOf(folder, dist) {
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) yield* sourcesOf(path, join(dist, entry.name));
    else if (/\.ts$/.test(entry.name) && !/\.(test|d)\.ts$/.test(entry.name))
      yield { path, built: join(dist, entry.name.replace(/\.ts$/, '.js')) };
  }
}

/** The reasons `packageDir` cannot be packed as it is: none when every source is built and not newer than its build. */
export function unbuiltSources(packageDir) {
  const problems = [];
  for (const { path, built } of sourcesOf(join(packageDir, 'src'), join(packageDir, 'dist'))) {
    if (!existsSync(built)) problems.push(`${relative(packageDir, built)} is missing`);
    else if (statSync(path).mtimeMs > statSync(built).mtimeMs)
      problems.push(`${relative(packageDir, path)} is newer than its build`);
  }
  return problems;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const problems = unbuiltSources(process.cwd());
  if (problems.length > 0) {
    console.error(`refusing to pack ${process.cwd()}: ${problems.join('; ')}. Run \`pnpm build\` first.`);
    process.exit(1);
  }
}
