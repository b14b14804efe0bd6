import { ContractError } from '@leasehold/contracts';
import { isErrno } from './errno.js';

/** `refused` about the file or folder at `path` (absolute), which the error carries as its `path`. */
export function refused(path: string, problem: string): ContractError {
  return new ContractError('refused', `${path}: ${problem}`, { path });
}

/** `conflict` about the file or folder at `path` (absolute), which the error carries as its `path`. */
export function conflict(path: string, problem: string): ContractError {
  return new ContractError('conflict', `${path}: ${problem}`, { path });
}

/**
 * Runs one system call on `path` after the folders above it were checked:
 * ENOENT then means another process removed `path` or one of those folders
 * meanwhile, a race the caller can retry (`conflict`), never a raw error.
 */
export function unlessRemoved<T>(path: string, call: () => T): T {
  try {
    return call();
  } catch (error) {
    if (isErrno(error, 'ENOENT')) throw removedMeanwhile(path, error);
    throw error;
  }
}

/** `conflict` for a name another process removed after it was checked (ENOENT from the system call, kept as `cause`). */
export function removedMeanwhile(path: string, cause: unknown): ContractError {
  return new ContractError('conflict', `${path}: it or a folder above it was removed meanwhile; read again`, {
    path,
    cause,
  });
}

/** Runs a removal; a name already gone (removed by a concurrent sweeper) is not an error. */
export function unlessGone(remove: () => void): void {
  try {
    remove();
  } catch (error) {
    if (!isErrno(error, 'ENOENT')) throw error;
  }
}
