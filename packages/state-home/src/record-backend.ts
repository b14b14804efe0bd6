import type { Backend } from '@leasehold/contracts';
import { Registry } from '@leasehold/registry';
import { openBackendFor, type OpenOptions } from './open-state-home.js';

/**
 * Records `backend` as the one `stateHome` uses, in its format document (never a credential):
 * what `leasehold init` does. Idempotent. An etcd backend is reached first, with the credentials
 * `options.env` names, so that a cluster that does not answer (a typo in its endpoints) is never
 * recorded: a state home keeps the backend it was made with.
 * @throws ContractError `unavailable` when etcd does not answer (nothing recorded); `refused` with
 * `path` when the state home records another backend, or one of its files is unsafe (nothing
 * changed); StateHomeError as `openStateHome`.
 */
export async function recordBackend(stateHome: string, backend: Backend, options: OpenOptions = {}): Promise<void> {
  if (backend.kind === 'etcd') {
    const opened = await openBackendFor(stateHome, backend, options);
    try {
      await opened.ownership.list();
    } finally {
      await opened.close();
    }
  }
  await new Registry(stateHome, { backend }).initialize();
}
