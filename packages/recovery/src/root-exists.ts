import { realpathSync, statSync } from 'node:fs';

/**
 * Whether a folder is at `root`, under that very name: a registered root that was deleted or
 * relinked still fences its place (diagnosis reports it), and a file there is no workspace.
 * Never throws.
 */
export function rootExists(root: string): boolean {
  try {
    return realpathSync(root) === root && statSync(root).isDirectory();
  } catch {
    return false;
  }
}
