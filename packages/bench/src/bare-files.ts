import { closeSync, constants, fsyncSync, linkSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

// The floors (section 1), written plainly with node:fs: the system
// calls a durable publication cannot do without, and nothing else. No checks,
// no hashes, no hooks. private-files is measured against these.

const NEW_FILE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL;
const FOLDER = constants.O_RDONLY | constants.O_DIRECTORY;

function writeAll(descriptor: number, bytes: Uint8Array): void {
  let offset = 0;
  while (offset < bytes.byteLength) offset += writeSync(descriptor, bytes, offset);
}

/** Opens `folder`, fsyncs it and closes it: what makes an entry change in it durable. */
export function fsyncFolder(folder: string): void {
  const descriptor = openSync(folder, FOLDER);
  try {
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
}

/** Creates `path` exclusively (0600) and writes `bytes`, without fsync; returns the open descriptor. */
export function writeNewFile(path: string, bytes: Uint8Array): number {
  const descriptor = openSync(path, NEW_FILE, 0o600);
  writeAll(descriptor, bytes);
  return descriptor;
}

/** Writes `bytes` to a new `temp`, fsyncs and closes it: the staging every publication of contents starts with. */
function stage(temp: string, bytes: Uint8Array): void {
  const descriptor = writeNewFile(temp, bytes);
  try {
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
}

/**
 * The bare durable create: a temp opened exclusively in `temp`'s folder,
 * written, fsynced, linked to `path` (atomic and exclusive), the temp
 * unlinked, the target folder fsynced (unless `syncFolder` is false: a
 * publication whose folder a later one fsyncs).
 */
export function bareCreate(path: string, temp: string, bytes: Uint8Array, syncFolder = true): void {
  stage(temp, bytes);
  linkSync(temp, path);
  unlinkSync(temp);
  if (syncFolder) fsyncFolder(dirname(path));
}

/**
 * A bare lock: the same create as `bareCreate`, its link retried after
 * `wait()` while another holder's file is there. Staged once, so a lost race
 * costs a link, not another write and fsync. `linking()` runs right before
 * each link (the last one's is when the lock was taken).
 */
export function bareLock(
  path: string,
  temp: string,
  bytes: Uint8Array,
  syncFolder: boolean,
  wait: () => void,
  linking: () => void,
): void {
  stage(temp, bytes);
  for (;;) {
    linking();
    try {
      linkSync(temp, path);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      wait();
    }
  }
  unlinkSync(temp);
  if (syncFolder) fsyncFolder(dirname(path));
}

/** The bare durable replace: a temp written and fsynced, renamed over `path`, the folder fsynced (unless `syncFolder` is false). */
export function bareReplace(path: string, temp: string, bytes: Uint8Array, syncFolder = true): void {
  stage(temp, bytes);
  renameSync(temp, path);
  if (syncFolder) fsyncFolder(dirname(path));
}

/** The bare durable remove: unlink, folder fsync (unless `syncFolder` is false). */
export function bareRemove(path: string, syncFolder = true): void {
  unlinkSync(path);
  if (syncFolder) fsyncFolder(dirname(path));
}
