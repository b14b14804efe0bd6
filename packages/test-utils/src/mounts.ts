import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

/** Every folder `mountOn` mounted, unmounted (last first) by `cleanUp` before the temp folders go. */
const mounted: string[] = [];

/**
 * Whether this process may mount file systems (only root may) and each of `tools` runs, for
 * `describe.skipIf(!mountsAllowed())`. Elsewhere it says what is missing and the tests are skipped;
 * under `CI=true` (where the tests run as root) something missing throws: a CI run must not pass by skipping.
 */
export function mountsAllowed(...tools: readonly 'bindfs'[]): boolean {
  const missing = [
    ...(process.getuid?.() === 0 ? [] : ['root (to mount)']),
    ...tools.filter((tool) => spawnSync(tool, ['--version']).error !== undefined).map((tool) => `\`${tool}\``),
  ];
  if (missing.length === 0) return true;
  if (process.env.CI === 'true')
    throw new Error(`missing: ${missing.join(', ')}, and CI=true: run as root with bindfs`);
  console.warn(`missing: ${missing.join(', ')}: the tests that mount file systems are skipped`);
  return false;
}

/**
 * Runs `command ...options <parent>/mounted` (`mount -t tmpfs tmpfs`, `bindfs SOURCE`) on that fresh
 * folder, and answers the folder, which `cleanUp` unmounts.
 */
export function mountOn(parent: string, command: 'mount' | 'bindfs', ...options: string[]): string {
  const folder = join(parent, 'mounted');
  mkdirSync(folder);
  execFileSync(command, [...options, folder], { stdio: 'pipe' });
  mounted.push(folder);
  return folder;
}

/** Unmounts every folder `mountOn` mounted, the last first (a mount inside another goes first). */
export function unmountAll(): void {
  for (const folder of mounted.splice(0).reverse()) execFileSync('umount', [folder]);
}
