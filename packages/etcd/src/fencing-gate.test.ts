import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanUp,
  codeOfAsync,
  etcdAvailable,
  killAndReap,
  makeTemporaryFolder,
  loopbackEndpoint,
  startEtcd,
  stopProcess,
  type EtcdCluster,
  type SpawnedChild,
} from '@leasehold/test-utils';
import { acquiredOwner, closeAll, freshPrefix, ownershipOf, rawClient, until } from '../test/helpers.js';
import { EtcdFencingGate, FileFencingGate } from './index.js';

/** The owner fixture's `count`-th answer to an admit (from 1), once it has printed it: `[key, value]`. */
async function admitAnswer(owner: SpawnedChild, count: number): Promise<[string, Record<string, unknown>]> {
  const answers = () => owner.lines.filter((line) => line.includes('"admitted"') || line.includes('"admitRefused"'));
  await until(async () => answers().length >= count);
  const message = JSON.parse(answers()[count - 1]!) as Record<string, Record<string, unknown>>;
  const key = 'admitted' in message ? 'admitted' : 'admitRefused';
  return [key, message[key]!];
}

describe.skipIf(!etcdAvailable())(
  'fencing gates: a resource admits a write only with a token at least as new as any it admitted',
  () => {
    let cluster: EtcdCluster;
    const gates: EtcdFencingGate[] = [];
    beforeAll(async () => {
      cluster = await startEtcd({ members: 1 });
    });
    afterEach(async () => {
      gates.splice(0).forEach((gate) => gate.close());
      await closeAll();
    });
    afterAll(cleanUp);

    const etcdGate = (key: string) => {
      const gate = new EtcdFencingGate({ endpoints: cluster.endpoints, key });
      gates.push(gate);
      return gate;
    };
    const valueAt = async (key: string) =>
      Buffer.from((await rawClient(cluster.endpoints).range(key)).kvs[0]?.value ?? []).toString();

    it('an owner paused past its lease, resumed, is refused by the resource (etcd and a local file) after its successor wrote', async () => {
      const prefix = freshPrefix();
      const root = '/srv/fenced-resource';
      const gateKey = `/resource${prefix}/gate`;
      const dataKey = `/resource${prefix}/data`;
      const tokenFile = join(makeTemporaryFolder('leasehold-gate-'), 'token.json');
      const { child: owner, sequencer: old } = await acquiredOwner({
        endpoints: cluster.endpoints,
        prefix,
        host: 'host-a',
        root,
        endpoint: loopbackEndpoint(47100),
        ttlSeconds: 2,
      });
      owner.send(`admit-etcd ${gateKey} ${dataKey} first`);
      expect(await admitAnswer(owner, 1)).toEqual(['admitted', { gate: gateKey }]);
      owner.send(`admit-file ${tokenFile}`);
      expect(await admitAnswer(owner, 2)).toEqual(['admitted', { gate: tokenFile }]);

      // Paused past its lease; an operator recovers the root and a successor takes it.
      await stopProcess(owner.pid);
      const other = ownershipOf(cluster.endpoints, prefix, 'host-b');
      await until(async () => (await other.inspect(root)).status === 'quarantined');
      await other.recover(root, (await other.recoveryView(root)).digest);
      const successor = await other.acquire(root, { endpoint: loopbackEndpoint(47101) });
      await etcdGate(gateKey).admit(successor.sequencer, [{ put: dataKey, value: 'successor' }]);
      new FileFencingGate(tokenFile).admit(successor.sequencer);

      // Its writes wait in its stdin: the first things it tries when resumed, with its old token.
      owner.send(`admit-etcd ${gateKey} ${dataKey} stale`);
      owner.send(`admit-file ${tokenFile}`);
      owner.process.kill('SIGCONT');
      const answers = [await admitAnswer(owner, 3), await admitAnswer(owner, 4)];
      const stale = `stale fencing token: revision ${old.revision} is older than revision ${successor.sequencer.revision}, already admitted (a newer owner has written)`;
      expect(answers).toEqual([
        ['admitRefused', { gate: gateKey, code: 'conflict', message: `etcd:${gateKey}: ${stale}` }],
        ['admitRefused', { gate: tokenFile, code: 'conflict', message: `${tokenFile}: ${stale}` }],
      ]);
      expect(await valueAt(dataKey)).toBe('successor');
      expect(JSON.parse(readFileSync(tokenFile, 'utf8'))).toEqual({
        schema: 'leasehold.fencing-token/1',
        root,
        cluster: successor.sequencer.cluster,
        revision: successor.sequencer.revision,
      });
      await successor.release();
      await killAndReap(owner);
    });

    it('admits the same token again, refuses a token of another root, and keeps the newest of racing admits', async () => {
      const prefix = freshPrefix();
      const ownership = ownershipOf(cluster.endpoints, prefix, 'host-a');
      const leases = await Promise.all(
        ['/srv/a', '/srv/b'].map((root, index) =>
          ownership.acquire(root, { endpoint: loopbackEndpoint(47110 + index) }),
        ),
      );
      const [a, b] = leases as [(typeof leases)[0], (typeof leases)[0]];
      const gateKey = `/resource${prefix}/gate`;
      const folder = makeTemporaryFolder('leasehold-gate-');
      const files = new FileFencingGate(join(folder, 'token.json'));
      await etcdGate(gateKey).admit(a.sequencer);
      await etcdGate(gateKey).admit(a.sequencer, [{ put: `/resource${prefix}/data`, value: 'again' }]);
      files.admit(a.sequencer);
      files.admit(a.sequencer);
      expect(await codeOfAsync(() => etcdGate(gateKey).admit(b.sequencer))).toBe('refused');
      expect(await codeOfAsync(async () => files.admit(b.sequencer))).toBe('refused');
      expect(await valueAt(`/resource${prefix}/data`)).toBe('again');

      // Tokens of one root, newest last; admitted in any order at once, the gate keeps the newest.
      const raceKey = `/resource${prefix}/race`;
      const tokens = ['7', '3', '12', '9', '12', '1'].map((revision) => ({
        ...a.sequencer,
        revision: (BigInt(a.sequencer.revision) + BigInt(revision)).toString(),
      }));
      const outcomes = await Promise.allSettled(tokens.map((token) => etcdGate(raceKey).admit(token)));
      expect(outcomes.some((outcome) => outcome.status === 'fulfilled')).toBe(true);
      const newest = (BigInt(a.sequencer.revision) + 12n).toString();
      expect(JSON.parse(await valueAt(raceKey)).revision).toBe(newest);
      for (const lease of leases) await lease.release();
    });
  },
);
