import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { onPath } from './etcd-tools.js';
import { makeTemporaryFolder } from './temporary-folders.js';

/**
 * A throwaway CA, a server certificate for IP 127.0.0.1 and a client certificate it signed, made by
 * `makeEtcdCertificates`: PEM files in a temp folder (removed by `cleanUp`), and the client's side as text.
 */
export interface EtcdCertificates {
  readonly caFile: string;
  readonly serverCertFile: string;
  readonly serverKeyFile: string;
  readonly clientCertFile: string;
  readonly clientKeyFile: string;
  readonly ca: string;
  readonly clientCert: string;
  readonly clientKey: string;
}

/** The extensions of each certificate: a CA that signs only, a server for IP 127.0.0.1, a client. */
const OPENSSL_CONFIG = `[req]
distinguished_name = dn
prompt = no
[dn]
CN = leasehold-test
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
[server]
basicConstraints = CA:FALSE
subjectAltName = IP:127.0.0.1
extendedKeyUsage = serverAuth
[client]
basicConstraints = CA:FALSE
extendedKeyUsage = clientAuth
`;

/** Makes a throwaway CA (P-256, valid one day) and a server and a client certificate it signed, with `openssl`, in a temp folder. */
export function makeEtcdCertificates(): EtcdCertificates {
  const binary = onPath('openssl');
  if (binary === undefined) throw new Error('openssl is not installed (no `openssl` on PATH): install openssl');
  const openssl = (args: readonly string[]): Buffer =>
    execFileSync(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const folder = makeTemporaryFolder('etcd-tls-');
  const file = (name: string): string => join(folder, name);
  writeFileSync(file('openssl.cnf'), OPENSSL_CONFIG);
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl([
    'req',
    '-x509',
    '-config',
    file('openssl.cnf'),
    '-extensions',
    'ca',
    ...newKey,
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.crt'),
    '-days',
    '1',
    '-subj',
    '/CN=leasehold-test-ca',
  ]);
  for (const [index, name] of ['server', 'client'].entries()) {
    openssl([
      'req',
      '-new',
      '-config',
      file('openssl.cnf'),
      ...newKey,
      '-keyout',
      file(`${name}.key`),
      '-out',
      file(`${name}.csr`),
      '-subj',
      `/CN=leasehold-test-${name}`,
    ]);
    openssl([
      'x509',
      '-req',
      '-in',
      file(`${name}.csr`),
      '-CA',
      file('ca.crt'),
      '-CAkey',
      file('ca.key'),
      '-set_serial',
      String(index + 1),
      '-days',
      '1',
      '-extfile',
      file('openssl.cnf'),
      '-extensions',
      name,
      '-out',
      file(`${name}.crt`),
    ]);
  }
  return {
    caFile: file('ca.crt'),
    serverCertFile: file('server.crt'),
    serverKeyFile: file('server.key'),
    clientCertFile: file('client.crt'),
    clientKeyFile: file('client.key'),
    ca: readFileSync(file('ca.crt'), 'utf8'),
    clientCert: readFileSync(file('client.crt'), 'utf8'),
    clientKey: readFileSync(file('client.key'), 'utf8'),
  };
}
