import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fileRecovery } from '@leasehold/recovery';
import {
  cleanUp,
  connectedClients,
  etcdAvailable,
  etcdctl,
  killAndReap,
  killDetached,
  logLines,
  loggedProcesses,
  messageOf,
  messagesOf,
  namesIn,
  spawnChild,
  startEtcd,
  treeOf,
  type EtcdCluster,
  type ConnectedClient,
  type LoggedProcess,
  type SpawnedChild,
} from '@leasehold/test-utils';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { etcdHostOn, statusUntil, type Host } from '../test/etcd-hosts.js';
import { BIN, Background, json, killAll, removeSandboxes, Server } from '../test/helpers.js';
import { capabilityLeaks, transcript } from '../test/transcript.js';

// A daemon's life on a state home that records etcd, through the built binary and real processes:
// clients that start `leasehold serve` on demand (16 at once, the first starter killed mid-start),
// an owner of another compatibility refused or replaced, and the starts that must change nothing
// (--recover-dead before a live owner or one of another PID namespace, --replace-config while fenced).

const CLIENT = fileURLToPath(new URL('../test/fixtures/on-demand-client.mjs', import.meta.url));
/** A bound far above what any start here takes: the tests wait on events, never on it. */
const PATIENT_MS = 60_000;

/** One workspace on one etcd host, and the logs its clients' starts append to. */
interface Scene {
  readonly host: Host & { readonly prefix: string };
  readonly workspace: string;
  readonly starts: string;
  readonly owners: string;
  readonly ownerErrors: string;
}

const scenes: Scene[] = [];

/** Whether a `leasehold serve` a client recorded is still that process (its pid and start time), as the seam judges a fenced process. */
const isLive = (owner: LoggedProcess) => fileRecovery().fencedProcess(owner).verdict === 'live';

/** Every key and value under the host's prefix: what a refused start must leave as it was. */
function etcdState(host: Scene['host']): Promise<string> {
  return etcdctl(cluster, ['get', '--prefix', host.prefix]);
}

/** The journal records under the host's prefix. */
function journalOf(host: Scene['host']): Promise<string> {
  return etcdctl(cluster, ['get', '--prefix', `${host.prefix}/journal/`, '--print-value-only']);
}

/** The start-claims folder's names (outside its staging folder): a claim or take-over marker left behind shows here. */
function claimFiles(scene: Scene): string[] {
  return namesIn(join(scene.host.box.stateHome, 'start-claims')).filter((name) => name !== '.staging');
}

let cluster: EtcdCluster;

async function makeScene(): Promise<Scene> {
  const host = await etcdHostOn(cluster, 'host-a');
  const workspace = host.box.workspace('on-demand');
  const log = (name: string) => join(host.box.folder, name);
  const scene = {
    host,
    workspace,
    starts: log('starts.log'),
    owners: log('owners.log'),
    ownerErrors: log('owner-errors.log'),
  };
  scenes.push(scene);
  return scene;
}

function spawnClient(scene: Scene, plan: Record<string, unknown> = {}): SpawnedChild {
  const base = {
    bin: BIN,
    workspace: scene.workspace,
    stateHome: scene.host.box.stateHome,
    starts: scene.starts,
    owners: scene.owners,
    ownerErrors: scene.ownerErrors,
  };
  return spawnChild(CLIENT, [JSON.stringify({ ...base, timeoutMs: PATIENT_MS, ...plan })], { env: scene.host.env });
}

/** Each client's connection, once every one ended connected (their output kept for the secrets check). */
async function connectedOf(clients: readonly SpawnedChild[]): Promise<ConnectedClient[]> {
  const { connected, outputs } = await connectedClients(clients);
  transcript.push(...outputs);
  return connected;
}

/** `status --json` of the scene's workspace. */
async function statusOf(scene: Scene): Promise<Record<string, unknown>> {
  return json(await scene.host.run(['status'], scene.workspace));
}

describe.skipIf(!etcdAvailable('etcdctl'))(
  "a daemon's life on the etcd backend: start on demand, compatibility, refusals that change nothing",
  () => {
    beforeAll(async () => {
      cluster = await startEtcd({ members: 1 });
    });
    afterEach(async () => {
      // The servers the scenes' clients launched detached, as each client recorded it in the scene's owners log.
      await killDetached(
        scenes.splice(0).flatMap((scene) => loggedProcesses(scene.owners)),
        isLive,
      );
      await killAll();
      removeSandboxes();
      expect(capabilityLeaks()).toEqual([]);
    });
    afterAll(cleanUp);

    it('16 processes racing connectOrStart start `leasehold serve` once in total, and all connect to it', async () => {
      const scene = await makeScene();
      const clients = Array.from({ length: 16 }, () => spawnClient(scene));
      const connected = await connectedOf(clients);
      const [owner, ...others] = loggedProcesses(scene.owners);
      expect(others).toEqual([]);
      expect(logLines(scene.starts)).toHaveLength(1);
      expect(new Set(connected.map(({ epoch }) => epoch)).size).toBe(1);
      expect(connected.map(({ pid }) => pid)).toEqual(clients.map(() => owner!.pid));
      scene.host.box.recordCapabilities();
      expect(await statusOf(scene)).toMatchObject({ status: 'running', pid: owner!.pid, epoch: connected[0]!.epoch });
      expect(json(await scene.host.run(['list'])).entries).toEqual([
        expect.objectContaining({ root: scene.workspace, pid: owner!.pid, ownerStatus: 'leased' }),
      ]);
      expect(claimFiles(scene)).toEqual([]);
    });

    it('when the first starter is SIGKILLed mid-start, one of the 15 others takes its claim over and starts the one owner', async () => {
      const scene = await makeScene();
      const clients = Array.from({ length: 16 }, () =>
        spawnClient(scene, { hangFirst: join(scene.host.box.folder, 'first-start') }),
      );
      const starting = await Promise.any(
        clients.map(async (client) => ({ client, message: await messageOf(client, 'starting') })),
      );
      const killed = starting.client;
      expect((await killAndReap(killed)).signal).toBe('SIGKILL');
      const survivors = clients.filter((client) => client !== killed);
      const connected = await connectedOf(survivors);
      const starts = logLines(scene.starts).map(Number);
      expect(starts).toEqual([killed.pid, expect.any(Number)]);
      expect(survivors.map((client) => client.pid)).toContain(starts[1]);
      const [owner, ...others] = loggedProcesses(scene.owners);
      expect(others).toEqual([]);
      expect(connected.map(({ pid }) => pid)).toEqual(survivors.map(() => owner!.pid));
      expect(new Set(connected.map(({ epoch }) => epoch)).size).toBe(1);
      scene.host.box.recordCapabilities();
      expect(claimFiles(scene)).toEqual([]);
    });

    it("an owner of another compatibility: 'refuse' names both and leaves it serving; 'replace' stops it and starts the client's own", async () => {
      const scene = await makeScene();
      const old = new Server([...scene.host.box.place(scene.workspace), '--compatibility', 'hello/1'], {
        env: scene.host.env,
      });
      const oldReady = await old.ready();
      scene.host.box.recordCapabilities();
      expect(await statusOf(scene)).toMatchObject({
        status: 'running',
        epoch: oldReady.epoch,
        compatibility: 'hello/1',
      });

      const refused = spawnClient(scene, { compatibility: 'hello/2' });
      expect((await refused.closed).code).toBe(1);
      const error = messagesOf(refused, 'error')[0]!;
      expect(error).toEqual({ error: 'conflict', message: expect.stringMatching(/"hello\/1".*"hello\/2"/) });
      expect(logLines(scene.starts)).toEqual([]);
      expect(await statusOf(scene)).toMatchObject({ status: 'running', epoch: oldReady.epoch, pid: old.pid });

      const [replaced] = await connectedOf([
        spawnClient(scene, {
          compatibility: 'hello/2',
          onIncompatible: 'replace',
          serveArgs: ['--compatibility', 'hello/2'],
        }),
      ]);
      expect((await old.exit()).code).toBe(0);
      expect(replaced).toMatchObject({ compatibility: 'hello/2', pid: loggedProcesses(scene.owners)[0]!.pid });
      expect(replaced!.epoch).not.toBe(oldReady.epoch);
      scene.host.box.recordCapabilities();
      expect(await statusOf(scene)).toMatchObject({
        status: 'running',
        epoch: replaced!.epoch,
        compatibility: 'hello/2',
      });
    });

    it('--recover-dead refuses a live owner, and a crashed one of another PID namespace (ambiguous), changing nothing in etcd or the files', async () => {
      const scene = await makeScene();
      const { host } = scene;
      const live = new Server(host.box.place(scene.workspace), { env: host.env });
      await live.ready();
      host.box.recordCapabilities();
      const beforeLive = { etcd: await etcdState(host), files: treeOf(host.box.stateHome, { folderTimes: false }) };
      const refusedLive = await host.run(['serve', '--recover-dead'], scene.workspace);
      expect(refusedLive.code).toBe(1);
      expect(json(refusedLive)).toMatchObject({
        error: 'conflict',
        message: expect.stringContaining(`pid ${live.pid}`),
      });
      expect({ etcd: await etcdState(host), files: treeOf(host.box.stateHome, { folderTimes: false }) }).toEqual(
        beforeLive,
      );

      // The owner runs as pid 1 of its own PID namespace; killing unshare kills it (--kill-child).
      const contained = host.box.workspace('contained');
      const namespaced = new Background(
        'unshare',
        [
          '--pid',
          '--fork',
          '--kill-child',
          '--mount-proc',
          process.execPath,
          BIN,
          'serve',
          '--json',
          ...host.box.place(contained),
          '--lease-ttl',
          '2',
        ],
        { env: host.env },
      );
      await namespaced.until((stdout) => (stdout.includes('"event":"ready"') ? true : undefined), 'ready line');
      host.box.recordCapabilities();
      await namespaced.kill9();
      // Once its lease ended (what etcd deletes with it is gone), every later look sees the same keys.
      await statusUntil(host, contained, 'quarantined');
      const before = { etcd: await etcdState(host), files: treeOf(host.box.stateHome, { folderTimes: false }) };
      const refused = await host.run(['serve', '--recover-dead'], contained);
      expect(refused.code).toBe(1);
      expect(json(refused)).toEqual({
        error: 'quarantine',
        message: expect.stringMatching(/pid 1 on host host-a\b.*ambiguous/),
        remedy: expect.stringContaining('leasehold recover'),
      });
      expect({ etcd: await etcdState(host), files: treeOf(host.box.stateHome, { folderTimes: false }) }).toEqual(
        before,
      );
      expect(await journalOf(host)).toBe('');
    });

    it('--replace-config is refused while a crashed owner fences the workspace, naming it, and changes nothing', async () => {
      const scene = await makeScene();
      const { host } = scene;
      const crashed = new Server([...host.box.place(scene.workspace), '--lease-ttl', '2'], { env: host.env });
      const ready = await crashed.ready();
      host.box.recordCapabilities();
      await crashed.kill9();
      await statusUntil(host, scene.workspace, 'quarantined');
      const before = { etcd: await etcdState(host), files: treeOf(host.box.stateHome, { folderTimes: false }) };
      const blocked = await host.run(['serve', '--replace-config', '--endpoint', ready.endpoint], scene.workspace);
      expect(blocked.code).toBe(1);
      expect(json(blocked)).toMatchObject({
        error: 'quarantine',
        message: expect.stringContaining(`pid ${crashed.pid} on host host-a`),
        remedy: expect.stringContaining('leasehold recover'),
      });
      expect({ etcd: await etcdState(host), files: treeOf(host.box.stateHome, { folderTimes: false }) }).toEqual(
        before,
      );
      expect((await statusOf(scene)).config).toMatchObject({ endpoint: 'http://127.0.0.1:0' });
    });
  },
);
