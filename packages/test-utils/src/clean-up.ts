import { stopChildren } from './child-process.js';
import { caughtErrors } from './contract-codes.js';
import { removeTemporaryFolders } from './temporary-folders.js';

/** Kills every child still running (SIGKILL) and waits until it is reaped, then removes every temp folder. */
export async function cleanUp(): Promise<void> {
  await stopChildren();
  removeTemporaryFolders();
  caughtErrors.splice(0);
}
