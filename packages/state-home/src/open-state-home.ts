import { ContractError, type Backend, type Ownership, type Recovery } from '@leasehold/contracts';
import { fileOwnership } from '@leasehold/coordination';
import type * as Etcd from '@leasehold/etcd';
import { errnoOf } from '@leasehold/private-files';
import { fileRecovery } from '@leasehold/recovery';
import { backendOf } from '@leasehold/registry';
import { credentialsOf, hostOf } from './etcd-environment.js';
import { StateHomeError } from './state-home-error.js';

/** The backend of one state home, opened. */
export interface OpenBackend {
  readonly stateHome: string;
  readonly backend: Backend;
  readonly ownership: Ownership;
  readonly recovery: Recovery;
  /** On etcd: this host's name there (`LEASEHOLD_HOST`, else the host name). */
  readonly host?: string;
  /** Lets go of connections (etcd); leases still held are lost. */
  close(): Promise<void>;
}

/** How to open a state home beyond what it records. */
export interface OpenOptions {
  /** Where etcd's credentials and this host's name are read from (default `process.env`). */
  readonly env?: NodeJS.ProcessEnv;
  /** On etcd: each lease's time to live, in seconds (default 10). */
  readonly ttlSeconds?: number;
}

/**
 * The backend `stateHome`'s format document names (a state home without one is
 * the file backend, until `leasehold init` records another), so that two hosts
 * can never use two backends on one state home: the choice is the document's,
 * not a flag's. What `leasehold` itself uses; a daemon passes its `ownership`
 * to `serveOwner`.
 * @throws ContractError `refused` for a state home path that is not absolute and normalised;
 * StateHomeError (`refused`, with its remedy) on a state home that records etcd, for etcd
 * credentials half set or unreadable, or `@leasehold/etcd` missing.
 */
export async function openStateHome(stateHome: string, options: OpenOptions = {}): Promise<OpenBackend> {
  return openBackendFor(stateHome, recordedBackend(stateHome), options);
}

const FILES: Backend = { kind: 'files' };

function recordedBackend(stateHome: string): Backend {
  try {
    return backendOf(stateHome) ?? FILES;
  } catch (error) {
    // An unreadable format document: the file backend reads such a state home as unavailable and
    // refuses every write to it, so nothing proceeds on a guess, and `diagnose` still reports it.
    if (ContractError.is(error, 'refused')) return FILES;
    throw error;
  }
}

/**
 * `backend` on `stateHome`, whatever the state home records (`leasehold init` opens the backend it
 * is asked to record, and reaches it, before recording it).
 * @throws as `openStateHome`.
 */
export async function openBackendFor(
  stateHome: string,
  backend: Backend,
  options: OpenOptions = {},
): Promise<OpenBackend> {
  return backend.kind === 'files' ? fileBackend(stateHome) : etcdBackendOf(stateHome, backend, options);
}

function fileBackend(stateHome: string): OpenBackend {
  const backend = FILES;
  const ownership = fileOwnership({ stateHome, backend });
  return {
    stateHome,
    backend,
    ownership,
    recovery: fileRecovery({ stateHome, backend }),
    close: () => ownership.close(),
  };
}

async function etcdBackendOf(
  stateHome: string,
  backend: Extract<Backend, { kind: 'etcd' }>,
  options: OpenOptions,
): Promise<OpenBackend> {
  const env = options.env ?? process.env;
  // Read before anything is loaded or reached, so a half-set variable is told as such, and first.
  const credentials = credentialsOf(env);
  const host = hostOf(env);
  const { etcdBackend } = await loadEtcd();
  const opened = etcdBackend({
    endpoints: backend.endpoints,
    prefix: backend.prefix,
    host,
    ...credentials,
    ...(options.ttlSeconds === undefined ? {} : { ttlSeconds: options.ttlSeconds }),
    // The host's own part (capability, checkout lock, owner config) stays in this state home's files.
    local: fileOwnership({ stateHome, backend }),
    localRecovery: fileRecovery({ stateHome, backend }),
  });
  return { stateHome, backend, ownership: opened, recovery: opened, host, close: () => opened.close() };
}

const ETCD_PACKAGE = '@leasehold/etcd';

/**
 * `@leasehold/etcd`, loaded here, for a state home that records etcd, and nowhere else: the etcd
 * client (gRPC, protobuf: hundreds of modules) would otherwise be most of every start-up on the
 * file backend. A bundle may keep it external (the `leasehold` command's does), so it can be
 * missing even though it is a dependency of this package.
 */
async function loadEtcd(): Promise<typeof Etcd> {
  try {
    return await import('@leasehold/etcd');
  } catch (error) {
    // Only the package itself missing: one of its own dependencies missing is a broken install, told as it is.
    if (errnoOf(error) !== 'ERR_MODULE_NOT_FOUND' || !(error as Error).message.includes(`'${ETCD_PACKAGE}'`))
      throw error;
    throw new StateHomeError(
      `this state home records etcd, and ${ETCD_PACKAGE} is not installed where it is loaded from`,
      'install-etcd',
      [],
      { cause: error },
    );
  }
}
