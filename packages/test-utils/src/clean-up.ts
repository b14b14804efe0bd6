import { stopChildren } from './child-process.js';
import { caughtErrors } from './contract-codes.js';
import { stopEtcds } from './etcd.js';
import { removeTemporaryFolders } from './temporary-folders.js';

/** Kills every child and etcd member still running (SIGKILL) and waits until each is reaped, then removes every temp folder. */
export async function cleanUp(): Promise<void> {
  await stopChildren();
  await stopEtcds();
  removeTemporaryFolders();
  caughtErrors.splice(0);
}
