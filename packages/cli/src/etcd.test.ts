import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanUp, etcdAvailable, etcdctl, pathExists, startEtcd, type EtcdCluster } from '@leasehold/test-utils';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { etcdHostOn, hostNamed, statusUntil } from '../test/etcd-hosts.js';
import {
  cli,
  json,
  jsonLines,
  killAll,
  removeSandboxes,
  Server,
  onLocalDisk,
  localFileSystem,
} from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

const DIGEST = /^[0-9a-f]{64}$/;

describe.skipIf(!etcdAvailable('etcdctl'))('leasehold on the etcd backend, two hosts through the built binary', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 1 });
  });
  const etcdHost = (name: string) => etcdHostOn(cluster, name);
  afterEach(async () => {
    await killAll();
    removeSandboxes();
    expect(capabilityLeaks()).toEqual([]);
  });
  afterAll(cleanUp);

  it('one owner across hosts; kill -9 is refused to others, then quarantined, until `leasehold recover` with the digest; journalled in etcd', async () => {
    const prefix = `/leasehold/cli-${randomUUID()}`;
    const a = hostNamed('host-a');
    const b = hostNamed('host-b');
    const endpoints = cluster.endpoints.join(',');

    // Each host's state home records the backend: endpoints and prefix, never a credential.
    for (const host of [a, b]) {
      const init = await host.run(['init', '--etcd-endpoints', endpoints, '--etcd-prefix', prefix]);
      expect(init.code).toBe(0);
      expect(json(init)).toEqual({
        initialized: true,
        stateHome: host.box.stateHome,
        backend: { kind: 'etcd', endpoints: [...cluster.endpoints], prefix },
        fileSystem: localFileSystem(host.box.stateHome),
      });
      expect((await host.run(['init', '--etcd-endpoints', endpoints, '--etcd-prefix', prefix])).code).toBe(0);
    }
    const format = JSON.parse(readFileSync(join(a.box.stateHome, 'v1', 'registry', 'format.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(format.backend).toEqual({ kind: 'etcd', endpoints: [...cluster.endpoints], prefix });
    // The wrong backend for a state home is refused, and changes nothing.
    const wrong = await a.run(['init']);
    expect(wrong.code).toBe(1);
    expect(json(wrong)).toMatchObject({
      error: 'refused',
      message: expect.stringContaining('etcd'),
      path: join(a.box.stateHome, 'v1', 'registry', 'format.json'),
      remedy: expect.stringContaining('keeps its backend'),
    });

    const workspace = a.box.workspace('shared');
    const server = new Server([...a.box.place(workspace), '--lease-ttl', '2'], { env: a.env });
    const ready = await server.ready();
    a.box.recordCapabilities();

    // Host A proves its owner live over the transport; host B sees who holds it, and cannot take it.
    expect(json(await a.run(['status'], workspace))).toEqual({
      status: 'running',
      ...onLocalDisk(a.box.stateHome),
      root: workspace,
      epoch: ready.epoch,
      endpoint: ready.endpoint,
      pid: server.pid,
      capabilityFile: expect.stringMatching(/\/service\/local-capability\.json$/),
      config: expect.any(Object),
    });
    const seenFromB = await b.run(['status'], workspace);
    expect(seenFromB.code).toBe(3);
    expect(json(seenFromB)).toMatchObject({
      status: 'unavailable',
      epoch: ready.epoch,
      reason: expect.stringContaining('host-a'),
    });
    const humanFromB = await cli(['status', ...b.box.place(workspace)], { env: b.env });
    expect(humanFromB.stdout).toContain('reason       served on host host-a');
    expect(humanFromB.stdout).toContain('It is served on another host: ask there with leasehold status');
    const taken = await b.run(['serve'], workspace);
    expect(json(taken).error).toBe('conflict');
    expect(json(await b.run(['list'])).entries).toEqual([
      expect.objectContaining({ root: workspace, host: 'host-a', pid: server.pid, ownerStatus: 'leased' }),
    ]);

    // kill -9: refused to everyone while its lease may live, then quarantined (never free) once it ended.
    await server.kill9();
    // The crashed host's own restart: its host proves the process gone, so the answer is quarantine naming it at
    // once, whether or not the lease has ended yet; never conflict.
    const restart = await a.run(['serve'], workspace);
    expect(restart.code).toBe(1);
    expect(json(restart)).toEqual({
      error: 'quarantine',
      message: expect.stringMatching(new RegExp(`pid ${server.pid} on host host-a, (absent|lease-ended)`)),
      remedy: expect.stringContaining('leasehold recover'),
    });
    const whileLeased = await b.run(['serve'], workspace);
    expect(whileLeased.code).toBe(1);
    expect(['conflict', 'quarantine']).toContain(json(whileLeased).error);
    const quarantined = await statusUntil(b, workspace, 'quarantined');
    expect(quarantined).toMatchObject({ status: 'quarantined', epoch: ready.epoch });
    expect(json(await b.run(['serve'], workspace)).error).toBe('quarantine');
    const doctor = await b.run(['doctor']);
    expect(doctor.code).toBe(3);
    expect(json(doctor).findings).toEqual([expect.objectContaining({ kind: 'etcd-lease-ended', workspace })]);

    // Host A reviews: its own dead owner's files and the etcd fence, every holder gone, one digest.
    const review = json(await a.run(['recover'], workspace));
    expect(review.ownerStatus).toBe('absent');
    expect(review.digest).toMatch(DIGEST);
    expect((review.fences as Array<{ kind: string }>).map(({ kind }) => kind)).toEqual(
      expect.arrayContaining(['etcd-fence', 'registry-row', 'owner-lock', 'capability']),
    );
    const digest = review.digest as string;
    const stale = digest.startsWith('0') ? `1${digest.slice(1)}` : `0${digest.slice(1)}`;
    expect(json(await a.run(['recover', '--digest', stale, '--yes'], workspace)).error).toBe('conflict');
    const recovered = await a.run(['recover', '--digest', digest, '--yes'], workspace);
    expect(recovered.code).toBe(0);
    expect(json(recovered)).toEqual({ recovered: true });
    const journal = await etcdctl(cluster, ['get', '--prefix', `${prefix}/journal/`, '--print-value-only']);
    expect(journal).toContain(`"root":"${workspace}"`);
    // It names the digest the operator confirmed, besides its own part's.
    expect(journal).toContain(`"reviewedDigest":"${digest}"`);
    // `leasehold journal` shows both records of that recovery: this host's files', and etcd's.
    const entries = json(await a.run(['journal'])).entries as Array<{
      record: string;
      root: string;
      reviewedDigest?: string;
    }>;
    expect(entries.map(({ root }) => root)).toEqual([workspace, workspace]);
    expect(entries).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ record: expect.stringMatching(/\/v1\/journal\/[^/]+\.json$/) }),
        expect.objectContaining({
          record: expect.stringMatching(new RegExp(`^etcd:${prefix}/journal/`)),
          reviewedDigest: digest,
        }),
      ]),
    );
    // For a person too: the digest the operator confirmed, beside the record's own part.
    const journalText = await cli(['journal', ...a.box.place(workspace)], { env: a.env });
    expect(journalText.stdout).toContain(`  reviewed digest  ${digest} (the one confirmed)\n`);

    // Now free across hosts: B serves it, and stops it.
    const next = new Server(b.box.place(workspace), { env: b.env });
    await next.ready();
    b.box.recordCapabilities();
    expect(json(await b.run(['status'], workspace)).status).toBe('running');
    expect((await b.run(['stop'], workspace)).code).toBe(0);
    expect((await next.exit()).code).toBe(0);
    expect(json(await b.run(['list'])).entries).toEqual([]);
  });

  it('serve --recover-dead: another host never recovers a crash; the crashed host does once its lease ended, journalled as automatic', async () => {
    const prefix = `/leasehold/cli-${randomUUID()}`;
    const a = hostNamed('host-a');
    const b = hostNamed('host-b');
    for (const host of [a, b])
      expect(
        (await host.run(['init', '--etcd-endpoints', cluster.endpoints.join(','), '--etcd-prefix', prefix])).code,
      ).toBe(0);
    const workspace = a.box.workspace('shared');
    const server = new Server([...a.box.place(workspace), '--lease-ttl', '2'], { env: a.env });
    await server.ready();
    a.box.recordCapabilities();
    await server.kill9();

    await statusUntil(b, workspace, 'quarantined');
    // Another host cannot prove a process of host-a gone: refused, nothing journalled.
    const elsewhere = await b.run(['serve', '--recover-dead'], workspace);
    expect(json(elsewhere)).toMatchObject({
      error: 'quarantine',
      message: expect.stringContaining(`pid ${server.pid} on host host-a (lease-ended)`),
    });
    expect(await etcdctl(cluster, ['get', '--prefix', `${prefix}/journal/`, '--print-value-only'])).toBe('');

    const restarted = new Server([...a.box.place(workspace), '--recover-dead'], { env: a.env });
    await restarted.ready();
    a.box.recordCapabilities();
    const journal = await etcdctl(cluster, ['get', '--prefix', `${prefix}/journal/`, '--print-value-only']);
    expect(journal).toContain(`{"by":"pid-and-start-time","holder":{"host":"host-a","pid":${server.pid},`);
    expect(journal).toContain('"reason":"owner-proved-dead"');
    // It said so before it served: the crashed process, proved gone, and the record (on etcd, the etcd record's id).
    const [recovered] = jsonLines(restarted.stdout);
    expect(recovered).toMatchObject({
      event: 'recovered',
      root: workspace,
      proved: expect.arrayContaining([
        { holder: expect.objectContaining({ host: 'host-a', pid: server.pid }), by: 'pid-and-start-time' },
      ]),
    });
    expect(journal).toContain(`"id":"${String(recovered!.record)}"`);
    expect((await a.run(['stop'], workspace)).code).toBe(0);
    expect((await restarted.exit()).code).toBe(0);
  });

  it("a daemon's life on etcd: SIGHUP stops cleanly, an upgrade needs --replace-config, run passes its program's status", async () => {
    const a = await etcdHost('host-a');
    const workspace = a.box.workspace('life');

    // A closed terminal (SIGHUP) is a clean stop: stopped, nothing to recover.
    const first = new Server(a.box.place(workspace), { env: a.env });
    const firstReady = await first.ready();
    a.box.recordCapabilities();
    first.child.kill('SIGHUP');
    expect((await first.exit()).code).toBe(0);
    expect(json(await a.run(['status'], workspace))).toEqual({
      status: 'stopped',
      ...onLocalDisk(a.box.stateHome),
      root: workspace,
      epoch: firstReady.epoch,
      config: expect.any(Object),
    });

    // The next version asks for another endpoint: refused naming the flag, then taken with it.
    const refused = await a.run(['serve', '--endpoint', firstReady.endpoint], workspace);
    expect(json(refused)).toMatchObject({ error: 'conflict', remedy: expect.stringContaining('--replace-config') });
    const upgraded = new Server([...a.box.place(workspace), '--endpoint', firstReady.endpoint, '--replace-config'], {
      env: a.env,
    });
    expect((await upgraded.ready()).endpoint).toBe(firstReady.endpoint);
    a.box.recordCapabilities();
    expect((await a.run(['stop'], workspace)).code).toBe(0);
    expect((await upgraded.exit()).code).toBe(0);

    // Any program as the owner: its own exit status comes back, and the workspace is released.
    const program = await cli(
      ['run', '--json', ...a.box.place(workspace), '--replace-config', '--', 'sh', '-c', 'exit 3'],
      { env: a.env },
    );
    expect(program.code).toBe(3);
    expect(json(await a.run(['status'], workspace)).status).toBe('stopped');
  });

  it('recover --all-dead on etcd: two owners killed, once their leases ended one digest over both, and a recovery of each', async () => {
    const a = await etcdHost('host-a');
    const crashed = [a.box.workspace('one'), a.box.workspace('two')];
    for (const root of crashed) {
      const server = new Server([...a.box.place(root), '--lease-ttl', '2'], { env: a.env });
      await server.ready();
      a.box.recordCapabilities();
      await server.kill9();
    }
    for (const root of crashed) await statusUntil(a, root, 'quarantined');
    const review = json(await a.run(['recover', '--all-dead']));
    expect((review.workspaces as Array<{ root: string }>).map(({ root }) => root)).toEqual([...crashed].sort());
    const recovered = await a.run(['recover', '--all-dead', '--digest', review.digest as string, '--yes']);
    expect(recovered.code).toBe(0);
    for (const root of crashed) expect(json(await a.run(['status'], root)).status).toBe('stopped');
  });

  it('init: an etcd that does not answer records nothing and says to check it; a state home of files keeps them, and another state home takes etcd', async () => {
    const host = hostNamed('host-a');
    const prefix = `/leasehold/cli-${randomUUID()}`;
    const unreachable = await host.run(['init', '--etcd-endpoints', 'http://127.0.0.1:1', '--etcd-prefix', prefix]);
    expect(unreachable.code).toBe(1);
    expect(json(unreachable)).toMatchObject({
      error: 'unavailable',
      remedy: expect.stringContaining('nothing was recorded: check that etcd answers at --etcd-endpoints'),
    });
    expect(pathExists(host.box.stateHome)).toBe(false);
    expect((await host.run(['init'])).code).toBe(0);
    const kept = await host.run(['init', '--etcd-endpoints', cluster.endpoints.join(','), '--etcd-prefix', prefix]);
    expect(kept.code).toBe(1);
    expect(json(kept)).toMatchObject({
      error: 'refused',
      remedy: 'a state home keeps its backend: use it as recorded, or pass another --state-home for this one',
    });
    const other = join(host.box.folder, 'state-etcd');
    const taken = await cli(
      [
        'init',
        '--state-home',
        other,
        '--etcd-endpoints',
        cluster.endpoints.join(','),
        '--etcd-prefix',
        prefix,
        '--json',
      ],
      { env: host.env },
    );
    expect(taken.code).toBe(0);
    expect(json(taken)).toMatchObject({ initialized: true, backend: { kind: 'etcd', prefix } });
  });

  it('`--lease-ttl` is a usage error on a state home of the file backend, and nothing is served', async () => {
    const host = hostNamed('host-a');
    const workspace = host.box.workspace('files');
    const refused = await host.run(['serve', '--lease-ttl', '2'], workspace);
    expect(refused.code).toBe(2);
    expect(json(refused)).toEqual({
      error: 'usage',
      message: '--lease-ttl: only for a state home on the etcd backend (this one uses files)',
      remedy: expect.stringContaining('leave out --lease-ttl'),
    });
  });
});
