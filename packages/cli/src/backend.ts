import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { ContractError, type Backend, type Ownership, type Recovery } from '@leasehold/contracts';
import { fileOwnership } from '@leasehold/coordination';
import type { EtcdAuth, EtcdTls } from '@leasehold/etcd';
import { errnoOf } from '@leasehold/private-files';
import { fileRecovery } from '@leasehold/recovery';
import { backendOf } from '@leasehold/registry';
import { assertAccess } from './access.js';
import { stateHomeOf, type CommandContext } from './context.js';
import { SetupError } from './remedies.js';

/** The backend of one state home, opened for one command. */
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
 * @throws ContractError `refused` for a state home path that is not absolute and normalised, or
 * etcd credentials half set or unreadable (the message names the variable).
 */
export async function openStateHome(stateHome: string, options: OpenOptions = {}): Promise<OpenBackend> {
  return openBackendFor(stateHome, recordedBackend(stateHome), options);
}

/**
 * The state home of a command line, opened, once this user is known to be allowed to use it
 * (`creates`: the command makes it when it is missing).
 * @throws ContractError `refused` with the path and a remedy about permissions when it is not.
 */
export async function openBackend(context: CommandContext, { ttlSeconds, creates = false }: { ttlSeconds?: number | undefined; creates?: boolean } = {}): Promise<OpenBackend> {
  const stateHome = stateHomeOf(context);
  assertAccess(stateHome, creates);
  return openStateHome(stateHome, { env: context.env, ...(ttlSeconds === undefined ? {} : { ttlSeconds }) });
}

const FILES: Backend = { kind: 'files' };

function recordedBackend(stateHome: string): Backend {
  try {
    return backendOf(stateHome) ?? FILES;
  } catch (error) {
    // An unreadable format document: the file backend reads such a state home as unavailable and
    // refuses every write to it, so nothing proceeds on a guess, and `doctor` still reports it.
    if (ContractError.is(error, 'refused')) return FILES;
    throw error;
  }
}

/** `backend` on `stateHome`, whatever the state home records (`leasehold init` checks it before recording). */
export async function openBackendFor(stateHome: string, backend: Backend, options: OpenOptions = {}): Promise<OpenBackend> {
  return backend.kind === 'files' ? fileBackend(stateHome) : etcdBackendOf(stateHome, backend, options);
}


function fileBackend(stateHome: string): OpenBackend {
  const backend = FILES;
  const ownership = fileOwnership({ stateHome, backend });
  return { stateHome, backend, ownership, recovery: fileRecovery({ stateHome, backend }), close: () => ownership.close() };
}

async function etcdBackendOf(stateHome: string, backend: Extract<Backend, { kind: 'etcd' }>, options: OpenOptions): Promise<OpenBackend> {
  // Loaded here, for a state home that records etcd, and nowhere else: the etcd client (gRPC,
  // protobuf: hundreds of modules) would otherwise be most of every command's start-up.
  const { etcdBackend } = await import('@leasehold/etcd');
  const env = options.env ?? process.env;
  const host = hostOf(env);
  const opened = etcdBackend({
    endpoints: backend.endpoints,
    prefix: backend.prefix,
    host,
    ...credentialsOf(env),
    ...(options.ttlSeconds === undefined ? {} : { ttlSeconds: options.ttlSeconds }),
    // The host's own part (capability, checkout lock, owner config) stays in this state home's files.
    local: fileOwnership({ stateHome, backend }),
    localRecovery: fileRecovery({ stateHome, backend }),
  });
  return { stateHome, backend, ownership: opened, recovery: opened, host, close: () => opened.close() };
}

/** This host's identity in etcd: `LEASEHOLD_HOST`, else the host name. */
function hostOf(env: NodeJS.ProcessEnv): string {
  return env.LEASEHOLD_HOST ?? hostname();
}

/**
 * etcd's credentials, from the environment only (a state home never records them):
 * `LEASEHOLD_ETCD_USER` and `LEASEHOLD_ETCD_PASSWORD`; `LEASEHOLD_ETCD_CA`, and
 * `LEASEHOLD_ETCD_CERT` with `LEASEHOLD_ETCD_KEY`, as PEM files. Not `ETCD_*`: etcd
 * itself reads every such variable as a flag.
 */
function credentialsOf(env: NodeJS.ProcessEnv): { auth?: EtcdAuth; tls?: EtcdTls } {
  const username = env.LEASEHOLD_ETCD_USER;
  const password = env.LEASEHOLD_ETCD_PASSWORD;
  if ((username === undefined) !== (password === undefined)) {
    throw new SetupError('LEASEHOLD_ETCD_USER and LEASEHOLD_ETCD_PASSWORD: set both or neither', 'export both variables, or unset both');
  }
  const ca = env.LEASEHOLD_ETCD_CA;
  const cert = env.LEASEHOLD_ETCD_CERT;
  const key = env.LEASEHOLD_ETCD_KEY;
  if ((cert === undefined) !== (key === undefined) || (cert !== undefined && ca === undefined)) {
    throw new SetupError('LEASEHOLD_ETCD_CERT and LEASEHOLD_ETCD_KEY: set both or neither, with LEASEHOLD_ETCD_CA', 'export the CA, and the client certificate with its key');
  }
  return {
    ...(username === undefined || password === undefined ? {} : { auth: { username, password } }),
    ...(ca === undefined ? {} : { tls: { ca: pem(ca, 'LEASEHOLD_ETCD_CA'), ...(cert === undefined || key === undefined ? {} : { cert: pem(cert, 'LEASEHOLD_ETCD_CERT'), key: pem(key, 'LEASEHOLD_ETCD_KEY') }) } }),
  };
}

function pem(path: string, variable: string): Uint8Array {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new SetupError(`${variable}: cannot read ${path} (${errnoOf(error) ?? 'error'})`, `point ${variable} at a readable PEM file`, { path, cause: error });
  }
}

/** Runs `use` on the state home's backend (or the one `opening` opens), and closes it whatever happens. */
export async function withBackend<T>(context: CommandContext, use: (opened: OpenBackend) => Promise<T>, opening: OpenBackend | Promise<OpenBackend> = openBackend(context)): Promise<T> {
  const opened = await opening;
  try {
    return await use(opened);
  } finally {
    await opened.close();
  }
}
