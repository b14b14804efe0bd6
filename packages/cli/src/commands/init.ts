import { ContractError, describeBackend } from '@leasehold/contracts';
import { StateHomeError, fileSystemOf, recordBackend } from '@leasehold/state-home';
import { stateHomeOf, type CommandContext } from '../context.js';
import { fileSystemWords } from '../file-system-words.js';
import { backendOption } from '../options.js';
import { RemedyError, SetupError } from '../remedies.js';

/**
 * `leasehold init`: records which backend the state home uses (`recordBackend` of
 * `@leasehold/state-home`, which reaches an etcd backend first). Idempotent; a state home that
 * already records another backend is `refused`, with nothing changed. Says the file system the state
 * home is on, and whether Leasehold's guarantees are known to hold there.
 */
export async function init(context: CommandContext): Promise<number> {
  const stateHome = stateHomeOf(context);
  const backend = backendOption(context.values['etcd-endpoints'], context.values['etcd-prefix']);
  await recordBackend(stateHome, backend, { env: context.env }).catch((error: unknown) => {
    // Nothing is recorded yet, so `status` would not help: the cluster the options name is what to check.
    if (ContractError.is(error, 'unavailable')) {
      throw new RemedyError(
        'unavailable',
        error.message,
        'nothing was recorded: check that etcd answers at --etcd-endpoints (and LEASEHOLD_ETCD_* for its credentials and TLS), then run this again',
        { cause: error },
      );
    }
    if (!ContractError.is(error, 'refused') || error.path === undefined || StateHomeError.is(error)) throw error;
    // The state home records another backend: a state home keeps the backend it was made with.
    throw new SetupError(
      error.message,
      'a state home keeps its backend: use it as recorded, or pass another --state-home for this one',
      { path: error.path, cause: error },
    );
  });
  const fileSystem = fileSystemOf(stateHome);
  context.output.record({ initialized: true, stateHome, backend, fileSystem });
  context.output.say(`${stateHome} uses the ${describeBackend(backend)}, on ${fileSystemWords(fileSystem)}`);
  return 0;
}
