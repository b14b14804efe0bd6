import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const temporaryFolders: string[] = [];

/** A fresh folder under `parent`, by default the system temp folder (resolved, 0700), removed by `cleanUp`. */
export function makeTemporaryFolder(prefix: string, parent = tmpdir()): string {
  const folder = realpathSync(mkdtempSync(join(parent, prefix)));
  chmodSync(folder, 0o700);
  temporaryFolders.push(folder);
  return folder;
}

/** A real workspace folder `<base>/workspaces/<name>` (made 0700 with its parents), resolved. */
export function makeWorkspace(place: { readonly base: string }, name: string): string {
  const folder = join(place.base, 'workspaces', name);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  return realpathSync(folder);
}

/** Removes every folder `makeTemporaryFolder` made. */
export function removeTemporaryFolders(): void {
  for (const folder of temporaryFolders.splice(0)) rmSync(folder, { recursive: true, force: true });
}
