import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  killAndReap,
  killUnreaped,
  spawnCommand,
  spawnFixture,
  spawnUnreaped,
  type SpawnedChild,
} from '@leasehold/test-utils';
import { currentProcess, ownerStatus, processDetails, processIdentity, type ProcessIdentity } from './index.js';
import { FIXTURES } from '../test/helpers.js';

afterEach(cleanUp);

const PROCESS_START = /^linux:[0-9a-f-]{36}:[0-9]+:[0-9]+$/;

/** This process's processStart, which must exist on Linux. */
function myStart(): string {
  const start = currentProcess().processStart;
  if (start === undefined) throw new Error('no processStart on this platform');
  return start;
}

/** The processStart fields: boot id, PID namespace, start time. */
function fieldsOf(processStart: string): [string, string, string] {
  const [kind, bootId, namespace, startTime, ...rest] = processStart.split(':');
  if (
    kind !== 'linux' ||
    bootId === undefined ||
    namespace === undefined ||
    startTime === undefined ||
    rest.length > 0
  ) {
    throw new Error('not a Linux processStart');
  }
  return [bootId, namespace, startTime];
}

/** A fixture process that printed its own currentProcess(); `wait` keeps it alive until its stdin closes. */
async function spawnIdentity(wait: boolean): Promise<{ identity: ProcessIdentity; release: () => Promise<void> }> {
  const child = spawnFixture(FIXTURES, 'identity.mjs', wait ? ['wait'] : []);
  const identity = JSON.parse(await child.line(() => true)) as ProcessIdentity;
  expect(identity.pid).toBe(child.pid);
  const release = async (): Promise<void> => {
    child.process.stdin.end();
    const end = await child.closed;
    expect(end.code).toBe(0);
  };
  if (!wait) await release();
  return { identity, release };
}

describe('currentProcess', () => {
  it('names this pid and host, and on Linux the boot id, PID namespace and start time', () => {
    const me = currentProcess();
    expect(me.pid).toBe(process.pid);
    expect(me.host).toBe(hostname());
    expect(me.processStart).toMatch(PROCESS_START);
    const [bootId, namespace, startTime] = fieldsOf(myStart());
    expect(bootId).toBe(readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
    expect(`pid:[${namespace}]`).toBe(readlinkSync('/proc/self/ns/pid'));
    const stat = readFileSync(`/proc/${process.pid}/stat`, 'utf8');
    // Field 22 counted from after the command name, which may hold spaces.
    expect(startTime).toBe(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    expect(currentProcess()).toEqual(me);
  });

  it('gives another process its own pid and start time, with this boot id and namespace', async () => {
    const { identity } = await spawnIdentity(false);
    expect(identity.pid).not.toBe(process.pid);
    expect(identity.host).toBe(hostname());
    const [bootId, namespace] = fieldsOf(myStart());
    const [childBoot, childNamespace] = fieldsOf(identity.processStart ?? '');
    expect([childBoot, childNamespace]).toEqual([bootId, namespace]);
  });
});

describe('processIdentity', () => {
  it("names a live child exactly as the child's own currentProcess() does, and that identity is live", async () => {
    const { identity, release } = await spawnIdentity(true);
    const seen = processIdentity(identity.pid);
    expect(seen).toEqual(identity);
    expect(ownerStatus(identity.pid, identity.host, seen?.processStart)).toBe('live');
    await release();
  });

  it('names this process as currentProcess() does', () => {
    expect(processIdentity(process.pid)).toEqual(currentProcess());
  });

  it('is undefined once the child has exited and been reaped', async () => {
    const { identity } = await spawnIdentity(false);
    expect(processIdentity(identity.pid)).toBeUndefined();
  });

  it('is undefined for a pid that names no one process', () => {
    for (const pid of [2_147_483_647, 0, -1, 1.5, Number.NaN])
      expect({ pid, identity: processIdentity(pid) }).toEqual({ pid, identity: undefined });
  });
});

describe('ownerStatus', () => {
  it('is live for this process, with and without processStart', () => {
    const me = currentProcess();
    expect(ownerStatus(me.pid, me.host)).toBe('live');
    expect(ownerStatus(me.pid, me.host, myStart())).toBe('live');
    expect(ownerStatus(me.pid, me.host, undefined)).toBe('live');
  });

  it('is live for a running child, and absent once it has exited, with and without processStart', async () => {
    const { identity, release } = await spawnIdentity(true);
    expect(ownerStatus(identity.pid, identity.host)).toBe('live');
    expect(ownerStatus(identity.pid, identity.host, identity.processStart)).toBe('live');
    await release();
    expect(ownerStatus(identity.pid, identity.host)).toBe('absent');
    expect(ownerStatus(identity.pid, identity.host, identity.processStart)).toBe('absent');
  });

  it('is absent for an exited child, with and without its processStart', async () => {
    const { identity } = await spawnIdentity(false);
    expect(ownerStatus(identity.pid, identity.host)).toBe('absent');
    expect(ownerStatus(identity.pid, identity.host, identity.processStart)).toBe('absent');
  });

  it('is absent for a pid that does not exist', () => {
    expect(ownerStatus(2_147_483_647, hostname())).toBe('absent');
  });

  it('is absent for a live pid with another start time (the pid was reused)', () => {
    const [bootId, namespace, startTime] = fieldsOf(myStart());
    const reused = `linux:${bootId}:${namespace}:${BigInt(startTime) + 1n}`;
    expect(ownerStatus(process.pid, hostname(), reused)).toBe('absent');
    expect(ownerStatus(process.pid, hostname(), `linux:${bootId}:${namespace}:0`)).toBe('absent');
  });

  it('is absent for another boot id, whatever the namespace', () => {
    const [bootId, namespace, startTime] = fieldsOf(myStart());
    const otherBoot = bootId.startsWith('0') ? `1${bootId.slice(1)}` : `0${bootId.slice(1)}`;
    expect(ownerStatus(process.pid, hostname(), `linux:${otherBoot}:${namespace}:${startTime}`)).toBe('absent');
    expect(ownerStatus(process.pid, hostname(), `linux:${otherBoot}:${BigInt(namespace) + 1n}:${startTime}`)).toBe(
      'absent',
    );
  });

  it('is ambiguous for another PID namespace', () => {
    const [bootId, namespace, startTime] = fieldsOf(myStart());
    expect(ownerStatus(process.pid, hostname(), `linux:${bootId}:${BigInt(namespace) + 1n}:${startTime}`)).toBe(
      'ambiguous',
    );
  });

  it('is ambiguous for another host, with and without processStart, even for this pid', () => {
    expect(ownerStatus(process.pid, `${hostname()}-elsewhere`)).toBe('ambiguous');
    expect(ownerStatus(process.pid, `${hostname()}-elsewhere`, myStart())).toBe('ambiguous');
  });

  it('is ambiguous for a malformed processStart', () => {
    const [bootId, namespace, startTime] = fieldsOf(myStart());
    const malformed = [
      '',
      'garbage',
      'linux:',
      `linux:${bootId}:${namespace}`,
      `linux:${bootId}:${namespace}:${startTime}:extra`,
      `linux:${bootId.toUpperCase()}x:${namespace}:${startTime}`,
      `linux:${bootId}:${namespace}:-1`,
      `darwin:${bootId}:${namespace}:${startTime}`,
      ` linux:${bootId}:${namespace}:${startTime}`,
    ];
    for (const processStart of malformed) {
      expect({ processStart, status: ownerStatus(process.pid, hostname(), processStart) }).toEqual({
        processStart,
        status: 'ambiguous',
      });
    }
  });
});

/** A shell that printed its pid (so it runs, past any exec) and waits for its stdin: `argv` after `sh -c SCRIPT`. */
async function waitingShell(
  command: string,
  args: readonly string[],
): Promise<{ child: SpawnedChild; identity: ProcessIdentity }> {
  const child = spawnCommand(command, args);
  const pid = Number(await child.line(() => true));
  const identity = processIdentity(pid);
  if (identity === undefined) throw new Error(`pid ${pid} is gone`);
  return { child, identity };
}

const SCRIPT = 'echo $$; read _';

describe('processDetails', () => {
  it('reads the command line, word for word, and the process group of a process that leads its own (setsid)', async () => {
    const { child, identity } = await waitingShell('setsid', ['sh', '-c', SCRIPT, 'sh', 'two words', '']);
    expect(identity.pid).toBe(child.pid);
    expect(processDetails(identity)).toEqual({
      commandLine: ['sh', '-c', SCRIPT, 'sh', 'two words', ''],
      processGroup: child.pid,
    });
  });

  it("gives a process in this process's group this process's group", async () => {
    const { identity } = await waitingShell('sh', ['-c', SCRIPT]);
    const stat = readFileSync('/proc/self/stat', 'utf8');
    // Field 5, counted from after the command name.
    const myGroup = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
    expect(processDetails(identity)).toEqual({ commandLine: ['sh', '-c', SCRIPT], processGroup: myGroup });
  });

  it('is undefined for a live pid with another start time (reused), without a start time, on another host, and once it is gone', async () => {
    const { child, identity } = await waitingShell('sh', ['-c', SCRIPT]);
    const [bootId, namespace, startTime] = fieldsOf(identity.processStart ?? '');
    const reused = { ...identity, processStart: `linux:${bootId}:${namespace}:${BigInt(startTime) + 1n}` };
    expect(processDetails(reused)).toBeUndefined();
    expect(processDetails({ pid: identity.pid, host: identity.host })).toBeUndefined();
    expect(processDetails({ ...identity, host: `${identity.host}-elsewhere` })).toBeUndefined();
    expect(processDetails(identity)).toBeDefined();
    await killAndReap(child);
    expect(processDetails(identity)).toBeUndefined();
  });
});

describe('a zombie (exited, not yet reaped by its parent)', () => {
  it('is absent with and without processStart, though kill(pid, 0) still finds it, and has no identity', async () => {
    const { pid } = await spawnUnreaped('sleep', ['1000']);
    const identity = processIdentity(pid);
    expect(ownerStatus(pid, hostname())).toBe('live');
    await killUnreaped(pid);
    expect(process.kill(pid, 0)).toBe(true);
    expect(ownerStatus(pid, hostname())).toBe('absent');
    expect(ownerStatus(pid, hostname(), identity?.processStart)).toBe('absent');
    expect(processIdentity(pid)).toBeUndefined();
  });
});
