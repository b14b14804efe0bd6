/**
 * The hidden first argument `doctor --verify-fs` starts each racing worker with: this very program,
 * run again. The worker module of @leasehold/private-files is not beside the bundled command, so the
 * command starts itself, and `main` hands such a process to `verifyFileSystemWorker`.
 */
export const VERIFY_FS_WORKER = '--verify-fs-worker';

/**
 * One racing worker of `verifyFileSystem`, loaded only in a worker; its tally goes to stdout. Run by
 * hand, without the job its parent gives it, it is a usage error (exit 2) that names the command.
 */
export async function verifyFsWorker(stderr: { write(text: string): unknown }): Promise<number> {
  const { ContractError, verifyFileSystemWorker } = await import('@leasehold/state-home');
  try {
    verifyFileSystemWorker();
    return 0;
  } catch (error) {
    if (!ContractError.is(error, 'refused')) throw error;
    stderr.write(
      `leasehold: usage: ${VERIFY_FS_WORKER} is one racing worker of doctor --verify-fs, not a command\n  run: leasehold doctor --verify-fs\n`,
    );
    return 2;
  }
}
