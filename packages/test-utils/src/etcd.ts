import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { get } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { delimiter, join } from 'node:path';
import { makeTemporaryFolder } from './temporary-folders.js';

/** One running etcd member as the test sees it; `pid` changes when it is restarted. */
export interface EtcdMember {
  readonly name: string;
  readonly pid: number;
  readonly clientUrl: string;
}

/** A real etcd cluster on loopback, started by `startEtcd` and stopped by `stop()` or `cleanUp`. */
export interface EtcdCluster {
  /** Every member's client URL, for a client's `endpoints`. */
  readonly endpoints: readonly string[];
  readonly members: readonly EtcdMember[];
  /** SIGSTOP member `index`: it keeps its sockets but answers nothing. */
  freeze(index: number): void;
  /** SIGCONT member `index`. */
  thaw(index: number): void;
  /** SIGKILL member `index` and wait until it is reaped. */
  kill(index: number): Promise<void>;
  /** Kill member `index` if it runs, start it again on its data folder, and wait until it is healthy. */
  restart(index: number): Promise<void>;
  /** SIGKILL every member and wait until each is reaped. */
  stop(): Promise<void>;
}

interface MemberPlan {
  readonly name: string;
  readonly clientUrl: string;
  readonly peerUrl: string;
  readonly dataDir: string;
}

interface RunningMember {
  readonly plan: MemberPlan;
  child: ChildProcess;
  exited: Promise<void>;
  stderr: string;
}

const HEALTH_WAIT_MS = 30_000;
const HEALTH_POLL_MS = 25;
const STDERR_KEPT = 4_000;
const running = new Set<RunningMember>();
let skipNoticeShown = false;

/**
 * Whether the `etcd` binary is on PATH, for `describe.skipIf(!etcdAvailable())`. Missing under
 * `CI=true` it throws (a CI run must not pass by skipping); elsewhere it says once that the etcd tests are skipped.
 */
export function etcdAvailable(): boolean {
  if (etcdBinary() !== undefined) return true;
  if (process.env.CI === 'true') throw new Error('etcd is not installed (no `etcd` on PATH) and CI=true: install etcd-server');
  if (!skipNoticeShown) console.warn('etcd is not installed (no `etcd` on PATH): the tests that need a real etcd are skipped');
  skipNoticeShown = true;
  return false;
}

/** Starts `members` real etcd members on free loopback ports with temp data folders and waits until each is healthy. */
export async function startEtcd(options: { readonly members: 1 | 3 }): Promise<EtcdCluster> {
  const binary = etcdBinary();
  if (binary === undefined) throw new Error('etcd is not installed (no `etcd` on PATH)');
  const ports = await freePorts(options.members * 2);
  const token = `leasehold-test-${process.pid}-${Date.now()}`;
  const plans = Array.from({ length: options.members }, (_, index): MemberPlan => ({
    name: `member${index}`,
    clientUrl: `http://127.0.0.1:${ports[index * 2]}`,
    peerUrl: `http://127.0.0.1:${ports[index * 2 + 1]}`,
    dataDir: makeTemporaryFolder(`etcd-member${index}-`),
  }));
  const initialCluster = plans.map((plan) => `${plan.name}=${plan.peerUrl}`).join(',');
  const launch = (plan: MemberPlan): RunningMember => launchMember(binary, plan, initialCluster, token);
  const members = plans.map(launch);
  await Promise.all(members.map(waitHealthy));
  const at = (index: number): RunningMember => {
    const member = members[index];
    if (member === undefined) throw new Error(`no etcd member ${index}`);
    return member;
  };
  return {
    endpoints: plans.map((plan) => plan.clientUrl),
    get members() {
      return members.map((member) => ({ name: member.plan.name, pid: member.child.pid ?? -1, clientUrl: member.plan.clientUrl }));
    },
    freeze: (index) => signal(at(index), 'SIGSTOP'),
    thaw: (index) => signal(at(index), 'SIGCONT'),
    kill: (index) => killMember(at(index)),
    async restart(index) {
      await killMember(at(index));
      const member = launch(at(index).plan);
      members[index] = member;
      await waitHealthy(member);
    },
    stop: async () => {
      await Promise.all(members.map(killMember));
    },
  };
}

/** SIGKILLs every member any `startEtcd` of this process left running and waits until each is reaped (`cleanUp` calls it). */
export async function stopEtcds(): Promise<void> {
  await Promise.all([...running].map(killMember));
}

/** The `etcd` executable on PATH, or undefined. */
function etcdBinary(): string | undefined {
  for (const folder of (process.env.PATH ?? '').split(delimiter).filter((entry) => entry !== '')) {
    const candidate = join(folder, 'etcd');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this folder
    }
  }
  return undefined;
}

/** `count` distinct free loopback ports: all held open together, so none is handed out twice. */
async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: count }, () => new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve(server));
    })),
  );
  const ports = servers.map((server) => (server.address() as AddressInfo).port);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

/** etcd reads every `ETCD_*` variable as a flag (and etcdctl `ETCDCTL_*`): the member gets an environment without them. */
function etcdEnvironment(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toUpperCase().startsWith('ETCD')));
}

function launchMember(binary: string, plan: MemberPlan, initialCluster: string, token: string): RunningMember {
  const args = [
    ['--name', plan.name],
    ['--data-dir', plan.dataDir],
    ['--listen-client-urls', plan.clientUrl],
    ['--advertise-client-urls', plan.clientUrl],
    ['--listen-peer-urls', plan.peerUrl],
    ['--initial-advertise-peer-urls', plan.peerUrl],
    ['--initial-cluster', initialCluster],
    ['--initial-cluster-token', token],
    ['--initial-cluster-state', 'new'],
    ['--logger', 'zap'],
    ['--log-level', 'error'],
  ].flat();
  const child = spawn(binary, args, { env: etcdEnvironment(), stdio: ['ignore', 'ignore', 'pipe'] });
  const member: RunningMember = { plan, child, exited: Promise.resolve(), stderr: '' };
  member.exited = new Promise((resolve) => {
    child.once('close', () => {
      running.delete(member);
      resolve();
    });
  });
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    member.stderr = (member.stderr + chunk).slice(-STDERR_KEPT);
  });
  child.on('error', (error) => {
    member.stderr += `${error.message}\n`;
  });
  running.add(member);
  return member;
}

function isRunning(member: RunningMember): boolean {
  return member.child.exitCode === null && member.child.signalCode === null;
}

function signal(member: RunningMember, name: NodeJS.Signals): void {
  if (!isRunning(member)) throw new Error(`etcd ${member.plan.name} is not running`);
  member.child.kill(name);
}

async function killMember(member: RunningMember): Promise<void> {
  if (isRunning(member)) member.child.kill('SIGKILL');
  await member.exited;
}

/** Polls the member's `/health` until it answers healthy; throws with its stderr if it exits or the bound passes. */
async function waitHealthy(member: RunningMember): Promise<void> {
  const deadline = Date.now() + HEALTH_WAIT_MS;
  while (!(await healthy(member.plan.clientUrl))) {
    if (!isRunning(member)) throw new Error(`etcd ${member.plan.name} exited before it was healthy: ${member.stderr}`);
    if (Date.now() > deadline) throw new Error(`etcd ${member.plan.name} not healthy after ${HEALTH_WAIT_MS} ms: ${member.stderr}`);
    await new Promise((resolve) => setTimeout(resolve, HEALTH_POLL_MS));
  }
}

function healthy(clientUrl: string): Promise<boolean> {
  return new Promise((resolve) => {
    const request = get(`${clientUrl}/health`, { timeout: 1_000 }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        body += chunk;
      });
      response.on('end', () => resolve(response.statusCode === 200 && /"health"\s*:\s*"true"/.test(body)));
    });
    request.on('timeout', () => request.destroy());
    request.on('error', () => resolve(false));
  });
}

// A test process that dies without cleanUp must not leave etcd members behind.
process.on('exit', () => {
  for (const member of running) if (isRunning(member)) member.child.kill('SIGKILL');
});
