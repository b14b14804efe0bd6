import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { cleanUp, etcdAvailable, startEtcd, type EtcdCluster } from '@leasehold/test-utils';
import { etcdHostOn } from '../test/etcd-hosts.js';
import {
  BIN,
  Background,
  cleanEnv,
  cli,
  json,
  jsonLines,
  killAll,
  removeSandboxes,
  sandbox,
  Server,
} from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

afterEach(async () => {
  await killAll();
  removeSandboxes();
  expect(capabilityLeaks()).toEqual([]);
});

const CHURN = fileURLToPath(new URL('../test/fixtures/churn.mjs', import.meta.url));

type Line = Record<string, unknown>;

/** `leasehold status --watch --json` of `workspace`, and a wait for its first line that `matches`. */
function watcher(place: readonly string[], env: NodeJS.ProcessEnv = cleanEnv()) {
  const watch = new Background(process.execPath, [BIN, 'status', '--watch', '--json', ...place], { env });
  const lines = () => jsonLines(watch.stdout);
  const until = (what: string, matches: (line: Line) => boolean) =>
    watch.until((stdout) => jsonLines(stdout).find(matches), what);
  return { watch, lines, until };
}

/**
 * The lines a watch told, once it ended: numbered 1..n, and every milestone (a line's status, with
 * ` (owner gone)` where status said its process is gone) among them in the order given.
 */
function expectStory(seen: readonly Line[], milestones: readonly string[]): void {
  expect(seen.map((line) => line.seq)).toEqual(seen.map((_, index) => index + 1));
  const story = seen.map((line) => `${String(line.status)}${line.reasonCode === 'owner-gone' ? ' (owner gone)' : ''}`);
  let at = -1;
  for (const milestone of milestones) {
    at = story.indexOf(milestone, at + 1);
    expect(at, `${milestone} after the earlier milestones in ${story.join(', ')}`).toBeGreaterThanOrEqual(0);
  }
}

/**
 * No gap unreported in the stop of the owner of `epoch`: its phase `stopping` is seen, or the
 * `stopped` after it says a state was passed over (a drain with nothing in flight lasts less than one read).
 */
function expectStopTold(seen: readonly Line[], epoch: string): void {
  const running = seen.findIndex((line) => line.status === 'running' && line.epoch === epoch);
  const stopped = seen.findIndex((line) => line.status === 'stopped' && line.epoch === epoch);
  const between = seen.slice(running + 1, stopped + 1);
  expect(
    between.some((line) => line.status === 'stopping') || seen[stopped]!.resync === true,
    JSON.stringify(between),
  ).toBe(true);
}

describe('status --watch: a line per change, told as status tells it', () => {
  it('follows serve, stop, a kill -9 and its recovery in order, while 8 other workspaces churn', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const place = box.place(workspace);
    // Two processes churn four workspaces each of the same state home, the whole time.
    const churners = [0, 1].map(
      (index) =>
        new Background(process.execPath, [
          CHURN,
          box.stateHome,
          box.workspace(`churn${index}`),
          '4',
          String(31_000 + index * 10),
        ]),
    );
    await Promise.all(
      churners.map((churner) => churner.until((out) => (out.includes('churning') ? true : undefined), 'churn')),
    );

    const { watch, lines, until } = watcher(place);
    await until('the first line', (line) => line.seq === 1);

    const first = await box.serve(workspace);
    await until('running', (line) => line.status === 'running' && line.epoch === first.ready.epoch);
    expect((await cli(['stop', ...place])).code).toBe(0);
    await until('stopped', (line) => line.status === 'stopped' && line.epoch === first.ready.epoch);

    const second = await box.serve(workspace);
    await until('running again', (line) => line.status === 'running' && line.epoch === second.ready.epoch);
    await second.server.kill9();
    await until('owner gone', (line) => line.reasonCode === 'owner-gone' && line.epoch === second.ready.epoch);
    const { digest } = json(await cli(['recover', ...place, '--json'])) as { digest: string };
    expect((await cli(['recover', ...place, '--digest', digest, '--yes'])).code).toBe(0);
    await until('recovered', (line) => line.status === 'stopped' && line.epoch === second.ready.epoch);

    watch.child.kill('SIGINT');
    expect((await watch.exit()).code).toBe(0);
    // One line per change, numbered in order; every state the test waited for, in the order it made them.
    const seen = lines();
    expectStory(seen, ['absent', 'running', 'stopped', 'running', 'unavailable (owner gone)', 'stopped']);
    expectStopTold(seen, first.ready.epoch);
  });

  it('--poll-ms without --watch is a usage error', async () => {
    const box = sandbox();
    const result = await cli(['status', '--poll-ms', '100', ...box.place(box.workspace('ws'))]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--poll-ms: only with --watch');
  });
});

describe.skipIf(!etcdAvailable('etcdctl'))('status --watch on a state home that records etcd', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 1 });
  });
  afterAll(cleanUp);

  it('follows serve, stop, a kill -9, its quarantine once its lease ended and its recovery with the digest, in order', async () => {
    const host = await etcdHostOn(cluster, 'host-a');
    const workspace = host.box.workspace('ws');
    const place = host.box.place(workspace);
    // A short lease, so that the killed owner's lease ends within the test.
    const serve = async () => {
      const server = new Server([...place, '--lease-ttl', '2'], { env: host.env });
      const ready = await server.ready();
      host.box.recordCapabilities();
      return { server, ready };
    };
    const { watch, lines, until } = watcher(place, host.env);
    await until('the first line', (line) => line.seq === 1);

    const first = await serve();
    await until('running', (line) => line.status === 'running' && line.epoch === first.ready.epoch);
    expect((await host.run(['stop'], workspace)).code).toBe(0);
    expect((await first.server.exit()).code).toBe(0);
    await until('stopped', (line) => line.status === 'stopped' && line.epoch === first.ready.epoch);

    const second = await serve();
    await until('running again', (line) => line.status === 'running' && line.epoch === second.ready.epoch);
    await second.server.kill9();
    // Its process gone is a verdict of this host (seen at a poll, if before the lease ends); the lease's end
    // deletes its etcd owner key, an event of the watched keys: quarantined, never free.
    await until('quarantined', (line) => line.status === 'quarantined' && line.epoch === second.ready.epoch);
    const { digest } = json(await host.run(['recover'], workspace)) as { digest: string };
    expect((await host.run(['recover', '--digest', digest, '--yes'], workspace)).code).toBe(0);
    await until('recovered', (line) => line.status === 'stopped' && line.epoch === second.ready.epoch);

    watch.child.kill('SIGINT');
    expect((await watch.exit()).code).toBe(0);
    const seen = lines();
    expectStory(seen, ['absent', 'running', 'stopped', 'running', 'quarantined', 'stopped']);
    expectStopTold(seen, first.ready.epoch);
    // Never free between the kill and the recovery: quarantined, or a passing or silent owner, until then.
    const killed = seen.findIndex((line) => line.status === 'running' && line.epoch === second.ready.epoch);
    const recovered = seen.findIndex((line) => line.status === 'stopped' && line.epoch === second.ready.epoch);
    const between = seen.slice(killed + 1, recovered).map((line) => line.status);
    expect(between.filter((status) => status === 'absent' || status === 'stopped')).toEqual([]);
  });
});
