import { lstatSync, watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import type { WatchSource, WorkspacePlaces } from '@leasehold/contracts';

/**
 * The folders whose entries make what `inspect` answers for one root (the table's, the private
 * root, its service folder, the folder's own mark's), and each folder above them up to the state
 * home, so that a folder made after the watch began is announced by its parent. A mark on a folder
 * above the root is not watched: the poll finds it.
 */
function foldersOf(places: WorkspacePlaces): string[] {
  return [
    nearestFolder(places.stateHome),
    places.namespace,
    places.registry,
    places.workspaces,
    places.privateRoot,
    places.service,
    // The workspace folder, which announces its mark's folder, and that folder once it is made.
    places.root,
    dirname(places.mark),
  ];
}

/** `path`, or the nearest folder above it that exists: a state home not made yet is announced by its parent. */
function nearestFolder(path: string): string {
  let folder = path;
  while (folder !== dirname(folder) && lstatSync(folder, { throwIfNoEntry: false }) === undefined)
    folder = dirname(folder);
  return folder;
}

/** One folder watched, as the inode it was when the watch began. */
interface Watched {
  readonly watcher: FSWatcher;
  readonly inode: bigint;
}

/**
 * Wakes a watch of one root when an entry of one of its folders changes (inotify on Linux, through
 * `fs.watch`). A notification only wakes a read: every read still proves every file and folder
 * (docs/threats.md), so a notification that lies or never comes costs at most a poll's wait. A
 * folder that does not exist yet is watched once a notification or a poll finds it; one replaced
 * (another inode) is watched anew.
 */
export function folderWakeups(places: WorkspacePlaces): WatchSource {
  return ({ changed, gap }) => {
    const watched = new Map<string, Watched>();
    /**
     * Watches every folder that exists as it is now; true when one was newly watched whose parent
     * was not already watched as it is: nothing announced its entries, which may have changed unseen.
     */
    const rearm = (): boolean => {
      const before = new Map(watched);
      const inodes = new Map<string, bigint | undefined>();
      let unannounced = false;
      const folders = foldersOf(places);
      // The nearest folder above a state home not made yet is watched only until the state home is.
      for (const [folder, { watcher }] of watched) {
        if (folders.includes(folder)) continue;
        watcher.close();
        watched.delete(folder);
      }
      for (const folder of folders) {
        const inode = lstatSync(folder, { bigint: true, throwIfNoEntry: false })?.ino;
        inodes.set(folder, inode);
        const known = watched.get(folder);
        if (known !== undefined && known.inode === inode) continue;
        known?.watcher.close();
        watched.delete(folder);
        if (inode === undefined) continue;
        try {
          const watcher = watch(folder, { persistent: false }, notified);
          // A watch that fails may have lost notifications: a gap; the next look at the folders watches it anew.
          watcher.on('error', () => {
            watcher.close();
            if (watched.get(folder)?.watcher === watcher) watched.delete(folder);
            gap();
          });
          watched.set(folder, { watcher, inode });
        } catch {
          // Gone between the lstat and the watch, or not watchable: the poll covers it.
          continue;
        }
        // A folder made (or replaced) in a parent watched all along: the parent's notification of
        // it is on its way, and the read it wakes comes after this watch began. Otherwise a gap.
        const parent = before.get(dirname(folder));
        if (parent === undefined || parent.inode !== inodes.get(dirname(folder))) unannounced = true;
      }
      return unannounced;
    };
    // A notification is a change announced: whatever the rearm finds, the read it wakes comes after.
    const notified = (): void => {
      rearm();
      changed();
    };
    rearm();
    // A folder that appeared with no notification (its parent is not watched: the state home was
    // set up after the watch began) may have changed before it was watched: a gap.
    const poll = setInterval(() => {
      if (rearm()) gap();
    }, REARM_MS);
    poll.unref();
    return () => {
      clearInterval(poll);
      for (const { watcher } of watched.values()) watcher.close();
      watched.clear();
    };
  };
}

/** How often the folders are looked at for one that appeared or was replaced without a notification. */
const REARM_MS = 1000;
