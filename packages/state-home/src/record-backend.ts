import { ContractError, type Backend, type FileSystemAllowance } from '@leasehold/contracts';
import { Registry } from '@leasehold/registry';
import { openBackendFor, type OpenOptions } from './open-state-home.js';

/**
 * Records `backend` as the one `stateHome` uses, in its format document (never a credential):
 * what `leasehold init` does. Idempotent. An etcd backend is reached first, with the credentials
 * `options.env` names, so that a cluster that does not answer (a typo in its endpoints) is never
 * recorded: a state home keeps the backend it was made with.
 * @throws ContractError `unavailable` when etcd does not answer (nothing recorded); `refused` with
 * `path` when the state home records another backend, or one of its files is unsafe (nothing
 * changed), or when it is on a file system whose guarantees are not proven and that
 * `allowFileSystem` does not name (an etcd state home cannot be allowed one); StateHomeError as
 * `openStateHome`.
 */
export async function recordBackend(
  stateHome: string,
  backend: Backend,
  options: OpenOptions & { readonly allowFileSystem?: FileSystemAllowance } = {},
): Promise<void> {
  const { allowFileSystem } = options;
  if (backend.kind === 'etcd' && allowFileSystem !== undefined) {
    throw new ContractError(
      'refused',
      `${stateHome}: only a state home of the file backend can be allowed a file system whose guarantees are not proven`,
      { remedy: "keep an etcd state home's files (this host's part) on a local disk, and pass no allowance" },
    );
  }
  if (backend.kind === 'etcd') {
    const opened = await openBackendFor(stateHome, backend, options);
    try {
      await opened.ownership.list();
    } finally {
      await opened.close();
    }
  }
  await new Registry(stateHome, {
    backend,
    ...(allowFileSystem === undefined ? {} : { allowFileSystem }),
  }).initialize();
}
