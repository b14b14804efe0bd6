import { randomUUID } from 'node:crypto';
import { chmodSync, lstatSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Whether `error` is the ENOENT of a path that does not exist. */
export function isMissing(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'code' in error && error.code === 'ENOENT';
}

/** Whether anything is at `path` (lstat, no link followed). */
export function pathExists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch (error) {
    if (isMissing(error)) return false;
    throw error;
  }
}

/** Sorted names in a folder, or an empty list when it does not exist. */
export function namesIn(folder: string): string[] {
  try {
    return readdirSync(folder).sort();
  } catch (error) {
    if (isMissing(error)) return [];
    throw error;
  }
}

/** The permission bits of whatever is at `path` (not following a link). */
export function modeOf(path: string): number {
  return lstatSync(path).mode & 0o7777;
}

/** The parsed JSON of a file read by hand; undefined when it does not exist; 'unreadable' when it does not parse. */
export function jsonOf(path: string): unknown {
  if (!pathExists(path)) return undefined;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as unknown;
  } catch {
    return 'unreadable';
  }
}

/** Replaces `path` by a new inode holding `bytes`, as a careless hand would: a 0600 file made in `scratch`, given `mode`, renamed over it. */
export function replaceFile(scratch: string, path: string, bytes: Uint8Array, mode = 0o600): void {
  const copy = join(scratch, `scratch-${randomUUID()}`);
  writeFileSync(copy, bytes, { mode: 0o600, flag: 'wx' });
  chmodSync(copy, mode);
  renameSync(copy, path);
}
