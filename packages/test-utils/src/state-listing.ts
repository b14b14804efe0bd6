import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathExists } from './files-by-hand.js';
import { handPlaces } from './hand-places.js';

/** One entry of a state listing: a folder, or a file with its bytes, inode and mtime. */
export type ListedEntry =
  | { readonly kind: 'folder' }
  | { readonly kind: 'file'; readonly ino: string; readonly mtimeNs: string; readonly bytes: string };

// Folder times, link counts and ctimes are left out: a lock taken and put back touches its folder's
// mtime, and sweeping a dead writer's second link of a published file changes its link count and
// ctime, and nothing else.

/** Every folder and file below the state home (relative names), staging and journal included: files with bytes (hex), inode and mtime. */
export function stateListing(stateHome: string): Record<string, ListedEntry> {
  return listing(stateHome, undefined);
}

/** The state listing without the staging folder, which every registry transaction sweeps of dead writers' leftovers. */
export function listingOutsideStaging(stateHome: string): Record<string, ListedEntry> {
  return listing(stateHome, handPlaces(stateHome, '/').staging);
}

/** The listing of `stateHome`, leaving out the folder `skipped` and all below it. */
function listing(stateHome: string, skipped: string | undefined): Record<string, ListedEntry> {
  const entries: Record<string, ListedEntry> = {};
  if (!pathExists(stateHome)) return entries;
  const visit = (path: string, relative: string): void => {
    for (const name of readdirSync(path).sort()) {
      const child = join(path, name);
      if (child === skipped) continue;
      const shown = relative === '' ? name : `${relative}/${name}`;
      const stats = lstatSync(child, { bigint: true });
      if (stats.isDirectory()) {
        entries[shown] = { kind: 'folder' };
        visit(child, shown);
      } else {
        entries[shown] = {
          kind: 'file',
          ino: String(stats.ino),
          mtimeNs: String(stats.mtimeNs),
          bytes: readFileSync(child).toString('hex'),
        };
      }
    }
  };
  visit(stateHome, '');
  return entries;
}
