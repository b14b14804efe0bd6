import { ContractError, describeBackend } from '@leasehold/contracts';
import { Registry } from '@leasehold/registry';
import { openBackendFor } from '@leasehold/state-home';
import { withBackend } from '../backend.js';
import { stateHomeOf, type CommandContext } from '../context.js';
import { backendOption } from '../options.js';
import { RemedyError, SetupError } from '../remedies.js';

/**
 * `leasehold init`: records which backend the state home uses in its format
 * document (never a credential). Idempotent; a state home that already records
 * another backend is `refused`, with nothing changed. An etcd backend is reached
 * (with the credentials of the environment) before it is recorded.
 */
export async function init(context: CommandContext): Promise<number> {
  const stateHome = stateHomeOf(context);
  const backend = backendOption(context.values['etcd-endpoints'], context.values['etcd-prefix']);
  // Reach etcd (with the environment's credentials) before recording it, so a typo is never recorded.
  if (backend.kind === 'etcd') {
    await withBackend(context, ({ ownership }) => ownership.list(), openBackendFor(stateHome, backend, { env: context.env })).catch((error: unknown) => {
      if (!ContractError.is(error, 'unavailable')) throw error;
      // Nothing is recorded yet, so `status` would not help: the cluster the options name is what to check.
      throw new RemedyError('unavailable', error.message, 'nothing was recorded: check that etcd answers at --etcd-endpoints (and LEASEHOLD_ETCD_* for its credentials and TLS), then run this again', { cause: error });
    });
  }
  await new Registry(stateHome, { backend }).initialize().catch((error: unknown) => {
    if (!ContractError.is(error, 'refused') || error.path === undefined) throw error;
    // The state home records another backend: a state home keeps the backend it was made with.
    throw new SetupError(error.message, 'a state home keeps its backend: use it as recorded, or pass another --state-home for this one', { path: error.path, cause: error });
  });
  context.output.record({ initialized: true, stateHome, backend });
  context.output.say(`${stateHome} uses the ${describeBackend(backend)}`);
  return 0;
}
