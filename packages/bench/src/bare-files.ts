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

/**
 * The bare durable create: a temp opened exclusively in `temp`'s folder,
 * written, fsynced, linked to `path` (atomic and exclusive), the temp
 * unlinked, the target folder fsynced.
 */
export function bareCreate(path: string, temp: string, bytes: Uint8Array): void {
  const descriptor = writeNewFile(temp, bytes);
  try {
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
  linkSync(temp, path);
  unlinkSync(temp);
  fsyncFolder(dirname(path));
}

/** The bare durable replace: a temp written and fsynced, renamed over `path`, the folder fsynced. */
export function bareReplace(path: string, temp: string, bytes: Uint8Array): void {
  const descriptor = writeNewFile(temp, bytes);
  try {
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
  renameSync(temp, path);
  fsyncFolder(dirname(path));
}

/** The bare durable remove: unlink, folder fsync. */
export function bareRemove(path: string): void {
  unlinkSync(path);
  fsyncFolder(dirname(path));
}
