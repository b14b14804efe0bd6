import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

let skipNoticeShown = false;

/** The Debian package that brings each tool a test may need besides etcd. */
const TOOL_PACKAGES = { etcd: 'etcd-server', etcdctl: 'etcd-client', openssl: 'openssl' } as const;
type Tool = keyof typeof TOOL_PACKAGES;

/**
 * Whether the `etcd` binary (and each of `tools`) is on PATH, for `describe.skipIf(!etcdAvailable())`.
 * One missing under `CI=true` throws (a CI run must not pass by skipping); elsewhere it says once that the etcd tests are skipped.
 */
export function etcdAvailable(...tools: readonly Exclude<Tool, 'etcd'>[]): boolean {
  const missing = (['etcd', ...tools] as const).filter((tool) => onPath(tool) === undefined);
  if (missing.length === 0) return true;
  const what = missing.map((tool) => `\`${tool}\``).join(', ');
  if (process.env.CI === 'true')
    throw new Error(
      `not on PATH: ${what}, and CI=true: install ${missing.map((tool) => TOOL_PACKAGES[tool]).join(' ')}`,
    );
  if (!skipNoticeShown) console.warn(`not on PATH: ${what}: the tests that need them are skipped`);
  skipNoticeShown = true;
  return false;
}

/** The executable `name` on PATH, or undefined. */
export function onPath(name: Tool): string | undefined {
  for (const folder of (process.env.PATH ?? '').split(delimiter).filter((entry) => entry !== '')) {
    const candidate = join(folder, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this folder
    }
  }
  return undefined;
}
