import { accessSync, constants, lstatSync } from 'node:fs';
import { dirname } from 'node:path';
import { errnoOf, isErrno } from '@leasehold/state-home';
import { RemedyError } from './remedies.js';

// The layers below refuse a state home this user may not use (a state home is its user's own:
// private-files refuses another user's folders). The command looks first, so that the answer is
// about permissions, with the path and the errno: never a crash's words (`unavailable`, a
// recovery), nor a "no problem found".

/** Why this user cannot use a state home: the path in the way, the problem, and what to do. */
export interface AccessProblem {
  readonly path: string;
  readonly problem: string;
  readonly remedy: string;
}

/** The errno of a system error that denies this user a path (`EACCES`, `EPERM`), or undefined for any other. */
export function permissionErrno(error: unknown): string | undefined {
  return isErrno(error, 'EACCES', 'EPERM') ? errnoOf(error) : undefined;
}

const OWN = 'or pass a --state-home of your own';

/**
 * What keeps this user from `stateHome`: a folder above it that it may not enter, the state home
 * belonging to another user, or (with `creates`, for a command that makes it) a missing state
 * home whose nearest existing folder this user may not write. Undefined when none does.
 */
export function accessProblem(stateHome: string, creates: boolean): AccessProblem | undefined {
  let uid: number;
  try {
    uid = lstatSync(stateHome).uid;
  } catch (error) {
    const denied = permissionErrno(error);
    if (denied !== undefined) {
      return {
        path: stateHome,
        problem: `permission denied (${denied}): this user may not enter a folder above it`,
        remedy: `run leasehold as the user whose state home it is, ${OWN}`,
      };
    }
    if (isErrno(error, 'ENOENT') && creates) return creationProblem(stateHome);
    return undefined; // missing (read as empty), or a file in the way: the commands say so themselves
  }
  const me = process.geteuid?.();
  if (me === undefined || uid === me) return undefined;
  return {
    path: stateHome,
    problem: `it belongs to uid ${uid}, not to this user (uid ${me})`,
    remedy: `run leasehold as uid ${uid}, the user whose daemons it holds, ${OWN}`,
  };
}

/** The nearest existing folder above a missing state home, when this user may not create in it. */
function creationProblem(stateHome: string): AccessProblem | undefined {
  let folder = dirname(stateHome);
  while (folder !== dirname(folder) && isErrno(tryLstat(folder), 'ENOENT')) folder = dirname(folder);
  try {
    accessSync(folder, constants.W_OK | constants.X_OK);
    return undefined;
  } catch (error) {
    const code = errnoOf(error) ?? 'EACCES';
    return {
      path: folder,
      problem: `${stateHome} cannot be created: this user may not write in ${folder} (${code})`,
      remedy: `create it as a user who may and give it to this one (mkdir -p ${stateHome}, then chown), ${OWN}`,
    };
  }
}

function tryLstat(path: string): unknown {
  try {
    lstatSync(path);
    return undefined;
  } catch (error) {
    return error;
  }
}

/** Throws the access problem of `stateHome`, if any, as `refused` with its path and remedy. */
export function assertAccess(stateHome: string, creates: boolean): void {
  const problem = accessProblem(stateHome, creates);
  if (problem !== undefined)
    throw new RemedyError('refused', `${problem.path}: ${problem.problem}`, problem.remedy, { path: problem.path });
}
