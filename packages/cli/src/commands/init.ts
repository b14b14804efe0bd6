import { ContractError, backendSchema, decode, describeBackend, type Backend } from '@leasehold/contracts';
import { Registry } from '@leasehold/registry';
import { openBackendFor, withBackend } from '../backend.js';
import { stateHomeOf, type CommandContext } from '../context.js';
import { SetupError } from '../remedies.js';

/** The backend the options ask for: files, or etcd with both `--etcd-endpoints` and `--etcd-prefix`. */
function requested(context: CommandContext): Backend {
  const endpoints = context.values['etcd-endpoints'];
  const prefix = context.values['etcd-prefix'];
  if (endpoints === undefined && prefix === undefined) return { kind: 'files' };
  if (typeof endpoints !== 'string' || typeof prefix !== 'string') {
    throw new SetupError('--etcd-endpoints and --etcd-prefix: give both, or neither for the file backend', 'pass --etcd-endpoints URL[,URL...] --etcd-prefix /PREFIX');
  }
  return decode(backendSchema, { kind: 'etcd', endpoints: endpoints.split(','), prefix }, '--etcd-endpoints/--etcd-prefix');
}

/**
 * `leasehold init`: records which backend the state home uses in its format
 * document (never a credential). Idempotent; a state home that already records
 * another backend is `refused`, with nothing changed. An etcd backend is reached
 * (with the credentials of the environment) before it is recorded.
 */
export async function init(context: CommandContext): Promise<number> {
  const stateHome = stateHomeOf(context);
  const backend = requested(context);
  // Reach etcd (with the environment's credentials) before recording it, so a typo is never recorded.
  if (backend.kind === 'etcd') await withBackend(context, ({ ownership }) => ownership.list(), openBackendFor(stateHome, backend, { env: context.env }));
  await new Registry(stateHome, { backend }).initialize().catch((error: unknown) => {
    if (!ContractError.is(error, 'refused') || error.path === undefined) throw error;
    // The state home records another backend: a state home keeps the backend it was made with.
    throw new SetupError(error.message, 'a state home keeps its backend: use it as recorded, or pass another --state-home for this one', { path: error.path, cause: error });
  });
  context.output.record({ initialized: true, stateHome, backend });
  context.output.say(`${stateHome} uses the ${describeBackend(backend)}`);
  return 0;
}
