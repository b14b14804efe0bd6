import { stopChildren } from './child-process.js';
import { caughtErrors } from './contract-codes.js';
import { stopEtcds } from './etcd.js';
import { unmountAll } from './mounts.js';
import { removeTemporaryFolders } from './temporary-folders.js';

/**
 * Kills every child and etcd member still running (SIGKILL) and waits until each is reaped, unmounts
 * every file system a test mounted, then removes every temp folder.
 */
export async function cleanUp(): Promise<void> {
  await stopChildren();
  await stopEtcds();
  unmountAll();
  removeTemporaryFolders();
  caughtErrors.splice(0);
}
