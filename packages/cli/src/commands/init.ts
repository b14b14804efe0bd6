import { ContractError, describeBackend, fileSystemInWords, stateHomeLayout } from '@leasehold/contracts';
import {
  StateHomeError,
  allowanceOf,
  fileSystemOf,
  recordBackend,
  type FileSystemAllowance,
  type FileSystemVerification,
} from '@leasehold/state-home';
import { stateHomeOf, type CommandContext } from '../context.js';
import { fileSystemReport } from '../file-system-words.js';
import { backendOption } from '../options.js';
import { RemedyError, SetupError } from '../remedies.js';
import { verificationWords, verified } from '../verification.js';

/**
 * `leasehold init`: records which backend the state home uses (`recordBackend` of
 * `@leasehold/state-home`, which reaches an etcd backend first). Idempotent; a state home that
 * already records another backend is `refused`, with nothing changed. Says the file system the state
 * home is on, and whether Leasehold's guarantees are known to hold there.
 */
export async function init(context: CommandContext): Promise<number> {
  const stateHome = stateHomeOf(context);
  const backend = backendOption(context.values['etcd-endpoints'], context.values['etcd-prefix']);
  const allowFs = context.values['allow-fs'];
  const { allowed, verification } = await allowance(
    context,
    stateHome,
    typeof allowFs === 'string' ? allowFs : undefined,
  );
  const allowFileSystem = allowed === undefined ? {} : { allowFileSystem: allowed };
  await recordBackend(stateHome, backend, { env: context.env, ...allowFileSystem }).catch((error: unknown) => {
    // Nothing is recorded yet, so `status` would not help: the cluster the options name is what to check.
    if (ContractError.is(error, 'unavailable')) {
      throw new RemedyError(
        'unavailable',
        error.message,
        'nothing was recorded: check that etcd answers at --etcd-endpoints (and LEASEHOLD_ETCD_* for its credentials and TLS), then run this again',
        { cause: error },
      );
    }
    if (
      !ContractError.is(error, 'refused') ||
      error.path !== stateHomeLayout(stateHome).registryFormat ||
      StateHomeError.is(error)
    )
      throw error;
    // Its format document records another backend: a state home keeps the backend it was made with.
    throw new SetupError(
      error.message,
      'a state home keeps its backend: use it as recorded, or pass another --state-home for this one',
      { path: error.path, cause: error },
    );
  });
  const fileSystem = fileSystemReport(stateHome);
  const verifyFs = verification === undefined ? {} : { verifyFs: verification };
  context.output.record({ initialized: true, stateHome, backend, fileSystem: fileSystem.record, ...verifyFs });
  context.output.say(`${stateHome} uses the ${describeBackend(backend)}, on ${fileSystem.words}`);
  return 0;
}

/**
 * `--allow-fs NAME`: the allowance for the file system the state home is on, once the verifier
 * passed there (its figures said first, and answered); none for a file system already proven.
 * @throws RemedyError `refused` when NAME is not that file system, or the verifier failed.
 */
async function allowance(
  context: CommandContext,
  stateHome: string,
  name: string | undefined,
): Promise<{ allowed?: FileSystemAllowance; verification?: FileSystemVerification }> {
  if (name === undefined) return {};
  const fileSystem = fileSystemOf(stateHome);
  const allowed = allowanceOf(fileSystem);
  if (name !== allowed.name) {
    throw new RemedyError(
      'refused',
      `${stateHome}: is on ${fileSystemInWords(fileSystem)}, not ${name}; nothing was recorded`,
      `allow the file system it is on: --allow-fs ${allowed.name}`,
    );
  }
  if (fileSystem.proven) return {};
  const result = await verified(stateHome, {}, context.command);
  context.output.say(`verified  ${verificationWords(result)}`);
  if (!result.passed) {
    throw new RemedyError(
      'refused',
      `${stateHome}: the check of ${allowed.name} failed (${result.errors[0] ?? `${result.lostUpdates} lost, ${result.tornReads} torn`}); nothing was recorded`,
      'keep the state home on a local disk (ext4, xfs, btrfs, tmpfs, overlay, f2fs, zfs, bcachefs)',
    );
  }
  return { allowed, verification: result };
}
