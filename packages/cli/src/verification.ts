import { ContractError } from '@leasehold/contracts';
import { verifyFileSystem, type FileSystemVerification, type VerifyFileSystemOptions } from '@leasehold/state-home';
import { UsageError } from './remedies.js';
import { VERIFY_FS_WORKER } from './verify-fs-worker.js';

// The file-system check `doctor --verify-fs` shows and `init --allow-fs` runs before it records an
// allowance: one way to run it and one way to say it.

/**
 * The verification, each worker the command's own entry file `command` run again (never the
 * program that called `main`: one that embeds the command would start itself); a number out of the
 * verifier's range is a usage error.
 */
export async function verified(
  stateHome: string,
  options: VerifyFileSystemOptions,
  command: string,
): Promise<FileSystemVerification> {
  try {
    return await verifyFileSystem(stateHome, {
      ...options,
      worker: [process.execPath, command, VERIFY_FS_WORKER],
    });
  } catch (error) {
    // Refused before anything is made, naming no file: `processes 1: not a whole number from 2 to 64`.
    if (ContractError.is(error, 'refused') && error.path === undefined)
      throw new UsageError(`--${error.message}`, (error.remedy ?? '').replace(/^give /, 'give --'));
    throw error;
  }
}

/** `tmpfs: 4 processes, 5 s, 12345 increments, 0 lost, 0 torn: passed`. */
export function verificationWords(result: FileSystemVerification): string {
  const { fileSystem, processes, seconds, increments, lostUpdates, tornReads, passed } = result;
  return `${fileSystem.name}: ${processes} processes, ${seconds} s, ${increments} increments, ${lostUpdates} lost, ${tornReads} torn: ${passed ? 'passed' : 'failed'}`;
}
