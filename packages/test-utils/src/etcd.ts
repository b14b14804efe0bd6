import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { get, type IncomingMessage } from 'node:http';
import { get as getTls } from 'node:https';
import { createServer, type AddressInfo } from 'node:net';
import type { EtcdCertificates } from './etcd-certificates.js';
import { onPath } from './etcd-tools.js';
import { stopProcess } from './stopped-processes.js';
import { makeTemporaryFolder } from './temporary-folders.js';

/** One running etcd member as the test sees it; `pid` changes when it is restarted. */
export interface EtcdMember {
  readonly name: string;
  readonly pid: number;
  readonly clientUrl: string;
}

/** A real etcd cluster on loopback, started by `startEtcd` and stopped by `stop()` or `cleanUp`. */
export interface EtcdCluster {
  /** Every member's client URL, for a client's `endpoints` (`https://` when started with `tls`). */
  readonly endpoints: readonly string[];
  /** The certificates its client URLs serve and require, when started with `tls`. */
  readonly tls: EtcdCertificates | undefined;
  readonly members: readonly EtcdMember[];
  /** SIGSTOP member `index` and wait until it is stopped: it keeps its sockets but answers nothing. */
  freeze(index: number): Promise<void>;
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
  readonly tls: EtcdCertificates | undefined;
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

/**
 * `etcd --version`'s version (such as `3.4.23`), or undefined when no etcd is on PATH: for a
 * program such as the bench, which skips what needs etcd rather than fail.
 */
export function etcdVersion(): string | undefined {
  const binary = onPath('etcd');
  if (binary === undefined) return undefined;
  const out = execFileSync(binary, ['--version'], {
    encoding: 'utf8',
    env: etcdEnvironment(),
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return /etcd Version:\s*(\S+)/.exec(out)?.[1] ?? 'unknown';
}

/**
 * Starts `members` real etcd members on free loopback ports with temp data folders and waits until each is healthy.
 * With `tls`, client URLs are https, serve its server certificate and require a client certificate its CA signed
 * (`--client-cert-auth`); peers stay on plain loopback http.
 */
export async function startEtcd(options: {
  readonly members: 1 | 3;
  readonly tls?: EtcdCertificates;
}): Promise<EtcdCluster> {
  const binary = onPath('etcd');
  if (binary === undefined) throw new Error('etcd is not installed (no `etcd` on PATH)');
  const ports = await freePorts(options.members * 2);
  const token = `leasehold-test-${process.pid}-${Date.now()}`;
  const scheme = options.tls === undefined ? 'http' : 'https';
  const plans = Array.from({ length: options.members }, (_, index): MemberPlan => ({
    name: `member${index}`,
    clientUrl: `${scheme}://127.0.0.1:${ports[index * 2]}`,
    peerUrl: `http://127.0.0.1:${ports[index * 2 + 1]}`,
    dataDir: makeTemporaryFolder(`etcd-member${index}-`),
    tls: options.tls,
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
    tls: options.tls,
    get members() {
      return members.map((member) => ({
        name: member.plan.name,
        pid: member.child.pid ?? -1,
        clientUrl: member.plan.clientUrl,
      }));
    },
    freeze: (index) => stopProcess(live(at(index)).child.pid ?? -1),
    thaw: (index) => {
      live(at(index)).child.kill('SIGCONT');
    },
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

/** `count` distinct free loopback ports: all held open together, so none is handed out twice. */
async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once('error', reject);
          server.listen(0, '127.0.0.1', () => resolve(server));
        }),
    ),
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
    ...(plan.tls === undefined
      ? []
      : [
          ['--cert-file', plan.tls.serverCertFile],
          ['--key-file', plan.tls.serverKeyFile],
          ['--trusted-ca-file', plan.tls.caFile],
          ['--client-cert-auth'],
        ]),
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

function live(member: RunningMember): RunningMember {
  if (!isRunning(member)) throw new Error(`etcd ${member.plan.name} is not running`);
  return member;
}

async function killMember(member: RunningMember): Promise<void> {
  if (isRunning(member)) member.child.kill('SIGKILL');
  await member.exited;
}

/** Polls the member's `/health` until it answers healthy; throws with its stderr if it exits or the bound passes. */
async function waitHealthy(member: RunningMember): Promise<void> {
  const deadline = Date.now() + HEALTH_WAIT_MS;
  while (!(await healthy(member.plan))) {
    if (!isRunning(member)) throw new Error(`etcd ${member.plan.name} exited before it was healthy: ${member.stderr}`);
    if (Date.now() > deadline)
      throw new Error(`etcd ${member.plan.name} not healthy after ${HEALTH_WAIT_MS} ms: ${member.stderr}`);
    await new Promise((resolve) => setTimeout(resolve, HEALTH_POLL_MS));
  }
}

/** Whether the member's `/health` answers healthy; over TLS it presents the client certificate its listener requires. */
function healthy(plan: MemberPlan): Promise<boolean> {
  return new Promise((resolve) => {
    const url = `${plan.clientUrl}/health`;
    const onResponse = (response: IncomingMessage): void => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        body += chunk;
      });
      response.on('end', () => resolve(response.statusCode === 200 && /"health"\s*:\s*"true"/.test(body)));
    };
    const request =
      plan.tls === undefined
        ? get(url, { timeout: 1_000 }, onResponse)
        : getTls(
            url,
            { timeout: 1_000, ca: plan.tls.ca, cert: plan.tls.clientCert, key: plan.tls.clientKey },
            onResponse,
          );
    request.on('timeout', () => request.destroy());
    request.on('error', () => resolve(false));
  });
}

/** etcd's own credential: a user name and its password. */
export interface EtcdUser {
  readonly name: string;
  readonly password: string;
}

/**
 * Runs `etcdctl` (v3 API) on every member of `cluster`, with its TLS files if it has them and as `user` if given;
 * answers its stdout, or throws with its stderr. Its environment has no `ETCD*` variable but the API version set here.
 */
export function etcdctl(cluster: EtcdCluster, args: readonly string[], user?: EtcdUser): Promise<string> {
  const tls =
    cluster.tls === undefined
      ? []
      : ['--cacert', cluster.tls.caFile, '--cert', cluster.tls.clientCertFile, '--key', cluster.tls.clientKeyFile];
  const credential = user === undefined ? [] : ['--user', user.name, '--password', user.password];
  const argv = [
    `--endpoints=${cluster.endpoints.join(',')}`,
    '--dial-timeout=5s',
    '--command-timeout=10s',
    ...tls,
    ...credential,
    ...args,
  ];
  const binary = onPath('etcdctl');
  if (binary === undefined)
    return Promise.reject(new Error('etcdctl is not installed (no `etcdctl` on PATH): install etcd-client'));
  return new Promise((resolve, reject) => {
    execFile(binary, argv, { env: { ...etcdEnvironment(), ETCDCTL_API: '3' } }, (error, stdout, stderr) => {
      if (error === null) resolve(stdout);
      else reject(new Error(`etcdctl ${args.join(' ')}: ${stderr.trim() || error.message}`));
    });
  });
}

/**
 * Turns on etcd's authentication: a `root` user (with the root role) with `rootPassword`, and for each of
 * `users` a role of its own whose only permission is readwrite on the keys starting with its `prefix`.
 */
export async function enableEtcdAuth(
  cluster: EtcdCluster,
  options: { readonly rootPassword: string; readonly users: readonly (EtcdUser & { readonly prefix: string })[] },
): Promise<void> {
  const addUser = (user: EtcdUser): Promise<string> =>
    etcdctl(cluster, ['user', 'add', user.name, `--new-user-password=${user.password}`, '--interactive=false']);
  await addUser({ name: 'root', password: options.rootPassword });
  await etcdctl(cluster, ['role', 'add', 'root']);
  await etcdctl(cluster, ['user', 'grant-role', 'root', 'root']);
  for (const user of options.users) {
    const role = `${user.name}-role`;
    await etcdctl(cluster, ['role', 'add', role]);
    await etcdctl(cluster, ['role', 'grant-permission', role, 'readwrite', user.prefix, '--prefix=true']);
    await addUser(user);
    await etcdctl(cluster, ['user', 'grant-role', user.name, role]);
  }
  await etcdctl(cluster, ['auth', 'enable']);
}

// A test process that dies without cleanUp must not leave etcd members behind.
process.on('exit', () => {
  for (const member of running) if (isRunning(member)) member.child.kill('SIGKILL');
});
