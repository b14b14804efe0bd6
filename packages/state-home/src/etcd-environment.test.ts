import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Backend, OwnerConfig } from '@leasehold/contracts';
import { Registry } from '@leasehold/registry';
import {
  bytesOf,
  cleanUp,
  enableEtcdAuth,
  etcdAvailable,
  makeEtcdCertificates,
  makeTemporaryFolder,
  makeWorkspace,
  sha256Hex,
  startEtcd,
} from '@leasehold/test-utils';
import { ContractError, openStateHome, type OpenBackend } from './index.js';

const opened: OpenBackend[] = [];

afterEach(async () => {
  await Promise.all(opened.splice(0).map((backend) => backend.close()));
  await cleanUp();
});

const ROOT_PASSWORD = 'root-Pw-7c21e9';
const PASSWORD = 'alice-Pw-0b5d34';
const WRONG_PASSWORD = 'wrong-Pw-e83f10';
const CONFIG: OwnerConfig = {
  schema: 'leasehold.owner-config/1',
  endpoint: 'http://127.0.0.1:0',
  policyIdentity: sha256Hex(bytesOf('{"policy":"p"}')),
};

describe.skipIf(!etcdAvailable('etcdctl'))(
  "etcd's credentials from the environment only, on a real etcd that requires TLS client certificates and a user",
  () => {
    it('works as the user and with the certificates the variables name; a wrong password is refused by etcd, and no message shows it', async () => {
      const certificates = makeEtcdCertificates();
      const cluster = await startEtcd({ members: 1, tls: certificates });
      const prefix = `/leasehold/state-home-environment-${process.pid}`;
      await enableEtcdAuth(cluster, {
        rootPassword: ROOT_PASSWORD,
        users: [{ name: 'alice', password: PASSWORD, prefix: `${prefix}/` }],
      });
      const base = makeTemporaryFolder('leasehold-state-home-etcd-');
      const home = join(base, 'state');
      const backend: Backend = { kind: 'etcd', endpoints: [...cluster.endpoints], prefix };
      // The record names the cluster only: what it takes to reach it is this host's, in its environment.
      await new Registry(home, { backend }).initialize();
      const env = {
        LEASEHOLD_HOST: 'host-a',
        LEASEHOLD_ETCD_CA: certificates.caFile,
        LEASEHOLD_ETCD_CERT: certificates.clientCertFile,
        LEASEHOLD_ETCD_KEY: certificates.clientKeyFile,
        LEASEHOLD_ETCD_USER: 'alice',
        LEASEHOLD_ETCD_PASSWORD: PASSWORD,
      };

      const alice = await openStateHome(home, { env });
      opened.push(alice);
      const root = makeWorkspace({ base }, 'ws');
      const lease = await alice.ownership.acquire(root, CONFIG, { boundEndpoint: 'http://127.0.0.1:40001' });
      expect(await alice.ownership.list()).toEqual([
        expect.objectContaining({ root, host: 'host-a', verdict: 'leased' }),
      ]);
      await lease.release();
      expect(await alice.ownership.list()).toEqual([]);

      const wrong = await openStateHome(home, { env: { ...env, LEASEHOLD_ETCD_PASSWORD: WRONG_PASSWORD } });
      opened.push(wrong);
      const refusal = await wrong.ownership.list().then(
        () => expect.unreachable('a wrong password listed'),
        (error: unknown) => error,
      );
      if (!ContractError.is(refusal)) throw refusal;
      expect(refusal.code).toBe('refused');
      expect(`${refusal.message} ${String(refusal.cause)}`).not.toContain(WRONG_PASSWORD);
    });
  },
);
