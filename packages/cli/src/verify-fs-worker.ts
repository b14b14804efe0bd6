/**
 * The hidden first argument `doctor --verify-fs` starts each racing worker with: this very program,
 * run again. The worker module of @leasehold/private-files is not beside the bundled command, so the
 * command starts itself, and `main` hands such a process to `verifyFileSystemWorker`.
 */
export const VERIFY_FS_WORKER = '--verify-fs-worker';

/** One racing worker of `verifyFileSystem`, loaded only in a worker; its tally goes to stdout. */
export async function verifyFsWorker(): Promise<number> {
  const { verifyFileSystemWorker } = await import('@leasehold/state-home');
  verifyFileSystemWorker();
  return 0;
}
