import { inspect } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanUp,
  enableEtcdAuth,
  etcdAvailable,
  etcdctl,
  loopbackEndpoint,
  makeEtcdCertificates,
  startEtcd,
  type EtcdCluster,
  type EtcdUser,
} from '@leasehold/test-utils';
import { freshPrefix, until } from '../test/helpers.js';
import { connect, type EtcdClient } from './etcd-client.js';
import { ContractError } from '@leasehold/contracts';
import type { EtcdAuth } from './etcd-client.js';
import { EtcdOwnership, type EtcdOwnershipOptions } from './ownership.js';

const ROOT: EtcdUser = { name: 'root', password: 'root-Pw-5e1f0a' };
const PERMITTED: EtcdUser = { name: 'alice', password: 'alice-Pw-93c2d7' };
const ELSEWHERE: EtcdUser = { name: 'bob', password: 'bob-Pw-4ab810' };
const WRONG_PASSWORD = 'wrong-Pw-d41d8c';
const authOf = (user: EtcdUser): EtcdAuth => ({ username: user.name, password: user.password });

const opened: { close(): void | Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((one) => Promise.resolve(one.close())));
});
afterAll(cleanUp);

function ownership(options: EtcdOwnershipOptions): EtcdOwnership {
  const made = new EtcdOwnership(options);
  opened.push(made);
  return made;
}

/** What `action` rejected with, which must be a ContractError. */
async function failureOf(action: () => Promise<unknown>): Promise<ContractError> {
  const error = await action().then(
    () => expect.unreachable('it succeeded'),
    (caught: unknown) => caught,
  );
  if (!ContractError.is(error)) throw error;
  return error;
}

describe.skipIf(!etcdAvailable('etcdctl'))(
  "etcd with authentication enabled and a role limited to the state home's prefix",
  () => {
    let cluster: EtcdCluster;
    let admin: EtcdClient;
    const prefix = freshPrefix();
    const as = (auth?: EtcdAuth): EtcdOwnership =>
      ownership({ endpoints: cluster.endpoints, prefix, host: 'host-a', ...(auth === undefined ? {} : { auth }) });
    /** Every key under the state home's prefix, read as root. */
    const keysUnderPrefix = async (): Promise<string[]> =>
      (await admin.range(`${prefix}/`, true)).kvs.map((kv) => kv.key);
    const leaseCount = async (): Promise<string> =>
      (await etcdctl(cluster, ['lease', 'list'], ROOT)).split('\n')[0] ?? '';

    beforeAll(async () => {
      cluster = await startEtcd({ members: 1 });
      const startedAt = performance.now();
      await enableEtcdAuth(cluster, {
        rootPassword: ROOT.password,
        users: [
          { ...PERMITTED, prefix: `${prefix}/` },
          { ...ELSEWHERE, prefix: '/leasehold/another-state-home/' },
        ],
      });
      console.log(
        `root, 2 users with their roles, auth enable (etcdctl): ${Math.round(performance.now() - startedAt)} ms`,
      );
      admin = connect({ endpoints: cluster.endpoints, auth: authOf(ROOT), requestTimeoutMs: 5000 });
    });
    afterAll(() => admin.close());

    it('lets the permitted user acquire, write fenced, release, and recover a quarantined root; its password is in no key', async () => {
      const alice = as(authOf(PERMITTED));
      const lease = await alice.acquire('/srv/auth', { endpoint: loopbackEndpoint(51000) });
      expect(await alice.inspect('/srv/auth')).toMatchObject({ status: 'idle', owner: { host: 'host-a' } });
      // Its role grants nothing outside the prefix: etcd refuses such a write, and the lease still holds.
      const outside = await failureOf(() => lease.fencedPut('/app/outside', 'x'));
      expect(outside).toMatchObject({
        code: 'refused',
        message: expect.stringContaining('etcdserver: permission denied'),
      });
      await lease.assert();
      await lease.release();
      expect(await alice.inspect('/srv/auth')).toEqual({ status: 'absent' });

      // A lease lost without a release (its ownership closed): quarantined, then recovered by the same user.
      const lost = as(authOf(PERMITTED));
      // TTL 3 s: long enough that the acquire itself ends well inside it on a busy machine.
      await lost.acquire('/srv/auth', { endpoint: loopbackEndpoint(51001), ttlSeconds: 3 });
      await lost.close();
      const closedAt = performance.now();
      await until(async () => (await alice.inspect('/srv/auth')).status === 'quarantined');
      console.log(
        `closed with its lease held (TTL 3 s) to quarantined: ${Math.round(performance.now() - closedAt)} ms`,
      );
      const snapshot = await alice.recoveryView('/srv/auth');
      const record = await alice.recover('/srv/auth', snapshot.digest, { user: 'operator' });
      expect(await alice.journal()).toEqual([record]);
      const next = await alice.acquire('/srv/auth', { endpoint: loopbackEndpoint(51002) });
      await next.release();

      const values = (await admin.range(`${prefix}/`, true)).kvs.map((kv) => Buffer.from(kv.value).toString());
      expect(values).toHaveLength(1);
      for (const value of values) expect(value).not.toContain(PERMITTED.password);
      expect(await leaseCount()).toBe('found 0 leases');
    });

    it('refuses a client with no credentials, saying etcd wants them, and writes nothing', async () => {
      const before = await keysUnderPrefix();
      const anonymous = as();
      const refusal = await failureOf(() => anonymous.acquire('/srv/anonymous', { endpoint: loopbackEndpoint(52000) }));
      console.log(`no credentials: ${refusal.code}: ${refusal.message}`);
      expect(refusal).toMatchObject({
        code: 'refused',
        message: expect.stringContaining('etcdserver: user name is empty'),
      });
      expect(refusal.message).toContain('pass `auth`');
      expect(await failureOf(() => anonymous.list())).toMatchObject({ code: 'refused' });
      expect(await anonymous.inspect('/srv/anonymous')).toMatchObject({
        status: 'unavailable',
        reason: expect.stringContaining('user name is empty'),
      });
      expect(await keysUnderPrefix()).toEqual(before);
      // etcd grants a lease without credentials; the refused acquire revoked it.
      expect(await leaseCount()).toBe('found 0 leases');
    });

    it("refuses a user whose role lacks the prefix, naming the user and etcd's answer, and writes nothing", async () => {
      const before = await keysUnderPrefix();
      const bob = as(authOf(ELSEWHERE));
      const refusal = await failureOf(() => bob.acquire('/srv/elsewhere', { endpoint: loopbackEndpoint(53000) }));
      console.log(`role without the prefix: ${refusal.code}: ${refusal.message}`);
      expect(refusal).toMatchObject({
        code: 'refused',
        message: expect.stringContaining('etcdserver: permission denied'),
      });
      expect(refusal.message).toContain('user "bob"');
      expect(await failureOf(() => bob.recoveryView('/srv/elsewhere'))).toMatchObject({ code: 'refused' });
      expect(await keysUnderPrefix()).toEqual(before);
      expect(await leaseCount()).toBe('found 0 leases');
    });

    it('refuses a wrong password and an unknown user without ever showing the password, and writes nothing', async () => {
      const before = await keysUnderPrefix();
      for (const username of [PERMITTED.name, 'nobody']) {
        const wrong = as({ username, password: WRONG_PASSWORD });
        const startedAt = performance.now();
        const refusal = await failureOf(() => wrong.acquire('/srv/wrong', { endpoint: loopbackEndpoint(54000) }));
        console.log(
          `wrong password for ${username}, refused in ${Math.round(performance.now() - startedAt)} ms: ${refusal.message}`,
        );
        expect(refusal).toMatchObject({ code: 'refused', message: expect.stringContaining('authentication failed') });
        const inspection = await wrong.inspect('/srv/wrong');
        // Not in the message, the stack, the cause, nor anything an inspection or a log would print.
        for (const shown of [
          refusal.message,
          String(refusal.stack),
          inspect(refusal, { depth: 10 }),
          JSON.stringify(inspection),
        ]) {
          expect(shown).not.toContain(WRONG_PASSWORD);
          expect(shown).not.toContain(PERMITTED.password);
        }
      }
      expect(await keysUnderPrefix()).toEqual(before);
      expect(await leaseCount()).toBe('found 0 leases');
    });
  },
);

describe.skipIf(!etcdAvailable('openssl'))(
  'etcd serving TLS and requiring client certificates (--client-cert-auth)',
  () => {
    let cluster: EtcdCluster;
    const prefix = freshPrefix();
    let certificates: ReturnType<typeof makeEtcdCertificates>;
    const over = (tls?: EtcdOwnershipOptions['tls'], auth?: EtcdAuth): EtcdOwnership =>
      ownership({
        endpoints: cluster.endpoints,
        prefix,
        host: 'host-a',
        ...(tls === undefined ? {} : { tls }),
        ...(auth === undefined ? {} : { auth }),
      });

    beforeAll(async () => {
      const madeAt = performance.now();
      certificates = makeEtcdCertificates();
      console.log(`CA, server and client certificates (openssl): ${Math.round(performance.now() - madeAt)} ms`);
      cluster = await startEtcd({ members: 1, tls: certificates });
    });

    it('serves a client with the CA and a client certificate it signed', async () => {
      const owner = over({ ca: certificates.ca, cert: certificates.clientCert, key: certificates.clientKey });
      const lease = await owner.acquire('/srv/tls', { endpoint: loopbackEndpoint(55000) });
      expect(cluster.endpoints.every((endpoint) => endpoint.startsWith('https://127.0.0.1:'))).toBe(true);
      await lease.fencedPut('/app/tls', 'x');
      await lease.release();
      expect(await owner.inspect('/srv/tls')).toEqual({ status: 'absent' });
    });

    it('refuses a client without a client certificate, and one that does not trust the CA, as refused and naming TLS', async () => {
      for (const [what, tls] of [
        ['no client certificate', { ca: certificates.ca }],
        ['the system CAs only', undefined],
      ] as const) {
        const startedAt = performance.now();
        const refusal = await failureOf(() =>
          over(tls).acquire('/srv/tls-refused', { endpoint: loopbackEndpoint(56000) }),
        );
        console.log(`${what}: refused in ${Math.round(performance.now() - startedAt)} ms: ${refusal.message}`);
        expect(refusal).toMatchObject({
          code: 'refused',
          message: expect.stringContaining('the TLS connection to etcd failed'),
        });
        expect(refusal.message).not.toContain(certificates.clientKey);
      }
      const trusted = over({ ca: certificates.ca, cert: certificates.clientCert, key: certificates.clientKey });
      expect(await trusted.list()).toEqual([]);
    });

    // Last: it turns authentication on for this cluster.
    it('with authentication enabled too: serves `tls` with `auth`, and refuses `tls` alone, writing nothing', async () => {
      const tls = { ca: certificates.ca, cert: certificates.clientCert, key: certificates.clientKey };
      await enableEtcdAuth(cluster, { rootPassword: ROOT.password, users: [{ ...PERMITTED, prefix: `${prefix}/` }] });
      const both = over(tls, authOf(PERMITTED));
      const lease = await both.acquire('/srv/tls-auth', { endpoint: loopbackEndpoint(57000) });
      await lease.release();
      const refusal = await failureOf(() => over(tls).acquire('/srv/tls-auth', { endpoint: loopbackEndpoint(57001) }));
      console.log(`TLS without auth on an etcd with authentication: ${refusal.code}: ${refusal.message}`);
      // etcd takes a certificate without a token as the user its common name names: here no user, so no permission.
      expect(refusal).toMatchObject({
        code: 'refused',
        message: expect.stringContaining('etcdserver: permission denied'),
      });
      expect(await both.list()).toEqual([]);
    });

    it('refuses TLS options that cannot work before connecting', () => {
      const tls = { ca: certificates.ca, cert: certificates.clientCert, key: certificates.clientKey };
      const options = { prefix, host: 'host-a' };
      expect(() => new EtcdOwnership({ ...options, endpoints: ['http://127.0.0.1:2379'], tls })).toThrow(
        expect.objectContaining({ code: 'refused' }),
      );
      expect(
        () => new EtcdOwnership({ ...options, endpoints: [...cluster.endpoints, 'http://127.0.0.1:2379'] }),
      ).toThrow(expect.objectContaining({ code: 'refused' }));
      expect(
        () =>
          new EtcdOwnership({
            ...options,
            endpoints: cluster.endpoints,
            tls: { ca: certificates.ca, cert: certificates.clientCert },
          }),
      ).toThrow(
        expect.objectContaining({ code: 'refused', message: expect.stringContaining('`cert` and `key` together') }),
      );
    });
  },
);
