/** A Node system error: an `Error` with a string errno `code` (`EACCES`, …), and the `syscall` and `path` when Node names them. */
export interface SystemError extends Error {
  readonly code: string;
  readonly syscall?: string;
  readonly path?: string;
}

/** The errno code of a Node system error (`EACCES`, …), or undefined for anything without a string `code`. Never throws. */
export function errnoOf(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string') {
    return error.code;
  }
  return undefined;
}

/** True when `error` is a system error with one of `codes`; swallow only what you expect. Never throws. */
export function isErrno(error: unknown, ...codes: string[]): boolean {
  const code = errnoOf(error);
  return code !== undefined && codes.includes(code);
}

/** True when `error` is an `Error` with a string errno `code`. Never throws. */
export function isSystemError(error: unknown): error is SystemError {
  return error instanceof Error && errnoOf(error) !== undefined;
}

// What stops a folder from being made or reached that no retry fixes, and what it
// means there. Other errors (EIO, ENOSPC) are the disk's, and stay as they are.
const SETUP_ERRNOS: ReadonlyMap<string, string> = new Map([
  ['EACCES', 'permission denied'],
  ['EPERM', 'permission denied'],
  ['EEXIST', 'exists and is not a folder'],
  ['ENOTDIR', 'a level above it is not a folder'],
  ['ENOENT', 'it or a level above it is a link to nothing'],
  ['ELOOP', 'too many levels of links'],
  ['EROFS', 'on a read-only file system'],
]);

/**
 * What the system error `directory(path, create)` threw means, in words, when no retry fixes it
 * (`permission denied` for EACCES and EPERM, `on a read-only file system` for EROFS, …);
 * undefined for any other error. Never throws.
 */
export function setupErrnoMeaning(error: unknown): string | undefined {
  const code = errnoOf(error);
  return code === undefined ? undefined : SETUP_ERRNOS.get(code);
}
