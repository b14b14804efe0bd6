import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanUp, etcdAvailable, startEtcd, type EtcdCluster } from '@leasehold/test-utils';
import { freshPrefix, race, releaseOwner } from '../test/helpers.js';

describe.skipIf(!etcdAvailable())('etcd ownership on a real 3-member cluster', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 3 });
  });
  afterAll(cleanUp);

  it('lets exactly one of 16 racers across 2 hosts, each starting at another member, own one root', async () => {
    const prefix = freshPrefix();
    const outcomes = await race(
      Array.from({ length: 16 }, (_, index) => ({
        // Each racer lists the members from another one on, so the racers talk to different members.
        endpoints: [...cluster.endpoints.slice(index % 3), ...cluster.endpoints.slice(0, index % 3)],
        prefix,
        host: index % 2 === 0 ? 'host-a' : 'host-b',
        root: '/srv/cluster',
        endpoint: `http://127.0.0.1:${50000 + index}`,
      })),
    );
    const winners = outcomes.filter(({ outcome }) => outcome === 'acquired');
    expect(winners).toHaveLength(1);
    expect(outcomes.filter(({ outcome }) => outcome === 'refused').map(({ detail }) => detail.code)).toEqual(
      Array(15).fill('conflict'),
    );
    await releaseOwner(winners[0]?.child ?? expect.unreachable());
  });
});
