import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { EtcdAuth, EtcdTls } from '@leasehold/etcd';
import { errnoOf } from '@leasehold/private-files';
import { StateHomeError } from './state-home-error.js';

/** This host's identity in etcd: `LEASEHOLD_HOST`, else the host name. */
export function hostOf(env: NodeJS.ProcessEnv): string {
  return env.LEASEHOLD_HOST ?? hostname();
}

/**
 * etcd's credentials, from the environment only (a state home never records them):
 * `LEASEHOLD_ETCD_USER` and `LEASEHOLD_ETCD_PASSWORD`; `LEASEHOLD_ETCD_CA`, and
 * `LEASEHOLD_ETCD_CERT` with `LEASEHOLD_ETCD_KEY`, as PEM files. Not `ETCD_*`: etcd
 * itself reads every such variable as a flag.
 * @throws StateHomeError (`refused`) for a variable set without its pair, a client certificate
 * without the CA, or a PEM file that cannot be read; the message names the variable, never its value.
 */
export function credentialsOf(env: NodeJS.ProcessEnv): { auth?: EtcdAuth; tls?: EtcdTls } {
  const username = env.LEASEHOLD_ETCD_USER;
  const password = env.LEASEHOLD_ETCD_PASSWORD;
  if ((username === undefined) !== (password === undefined)) {
    throw new StateHomeError(
      'LEASEHOLD_ETCD_USER and LEASEHOLD_ETCD_PASSWORD: set both or neither',
      'set-both-or-neither',
      ['LEASEHOLD_ETCD_USER', 'LEASEHOLD_ETCD_PASSWORD'],
    );
  }
  const ca = env.LEASEHOLD_ETCD_CA;
  const cert = env.LEASEHOLD_ETCD_CERT;
  const key = env.LEASEHOLD_ETCD_KEY;
  if ((cert === undefined) !== (key === undefined)) {
    throw new StateHomeError('LEASEHOLD_ETCD_CERT and LEASEHOLD_ETCD_KEY: set both or neither', 'set-both-or-neither', [
      'LEASEHOLD_ETCD_CERT',
      'LEASEHOLD_ETCD_KEY',
    ]);
  }
  if (cert !== undefined && ca === undefined) {
    throw new StateHomeError(
      'LEASEHOLD_ETCD_CERT and LEASEHOLD_ETCD_KEY: a client certificate needs LEASEHOLD_ETCD_CA',
      'set-also',
      ['LEASEHOLD_ETCD_CA'],
    );
  }
  return {
    ...(username === undefined || password === undefined ? {} : { auth: { username, password } }),
    ...(ca === undefined
      ? {}
      : {
          tls: {
            ca: pem(ca, 'LEASEHOLD_ETCD_CA'),
            ...(cert === undefined || key === undefined
              ? {}
              : { cert: pem(cert, 'LEASEHOLD_ETCD_CERT'), key: pem(key, 'LEASEHOLD_ETCD_KEY') }),
          },
        }),
  };
}

function pem(path: string, variable: string): Uint8Array {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new StateHomeError(
      `${variable}: cannot read ${path} (${errnoOf(error) ?? 'error'})`,
      'readable-file',
      [variable],
      { path, cause: error },
    );
  }
}
