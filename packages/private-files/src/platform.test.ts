import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  contractErrorOf,
  killAndReap,
  killUnreaped,
  spawnCommand,
  spawnUnreaped,
} from '@leasehold/test-utils';
import { PrivateFiles } from './index.js';
import { assertSupportedPlatform, hostPlatform, platformFor } from './platform.js';
import { ProcessLiveness } from './process-liveness.js';
import { makeRoot } from '../test/helpers.js';

afterEach(cleanUp);

/** A live child and its pid, once it runs (past any exec). */
async function liveChild(): Promise<{ pid: number; stop: () => Promise<unknown> }> {
  const child = spawnCommand('sh', ['-c', 'echo $$; read _']);
  const pid = Number(await child.line(() => true));
  return { pid, stop: () => killAndReap(child) };
}

describe('the platform', () => {
  it('is Linux here, read from /proc', () => {
    expect(hostPlatform).toBe(platformFor('linux'));
    expect(hostPlatform.processStat('self')).toEqual({
      startTime: expect.stringMatching(/^[0-9]+$/),
      processGroup: expect.any(Number),
    });
  });

  it('elsewhere reads nothing: every answer is "cannot tell"', () => {
    const other = platformFor('freebsd');
    expect(other.name).toBe('freebsd');
    expect([other.processStat('self'), other.processStat(process.pid), other.bootId(), other.pidNamespace()]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(other.commandLine(process.pid)).toBeUndefined();
  });
});

describe('process liveness where no start time can be read', () => {
  const other = new ProcessLiveness(platformFor('darwin'));
  const linux = new ProcessLiveness(platformFor('linux'));

  it('names this process without processStart', () => {
    expect(other.currentProcess()).toEqual({ pid: process.pid, host: hostname() });
  });

  it('is live for a running child, with no processStart and no details', async () => {
    const { pid, stop } = await liveChild();
    const identity = other.processIdentity(pid);
    expect(identity).toEqual({ pid, host: hostname() });
    expect(other.ownerStatus(pid, hostname())).toBe('live');
    expect(other.processDetails({ pid, host: hostname() })).toBeUndefined();
    await stop();
  });

  it('never proves a killed and reaped child absent by its pid alone: ambiguous, where Linux says absent', async () => {
    const { pid, stop } = await liveChild();
    await stop();
    expect(linux.ownerStatus(pid, hostname())).toBe('absent');
    expect(other.ownerStatus(pid, hostname())).toBe('ambiguous');
    // Nor with a start time this platform cannot read.
    const recorded = linux.currentProcess().processStart;
    expect(other.ownerStatus(pid, hostname(), recorded)).toBe('ambiguous');
  });

  it('is live for a zombie, which kill(pid, 0) still finds and nothing here tells from a running process', async () => {
    const { pid } = await spawnUnreaped('sleep', ['1000']);
    await killUnreaped(pid);
    expect(linux.ownerStatus(pid, hostname())).toBe('absent');
    expect(other.ownerStatus(pid, hostname())).toBe('live');
  });
});

describe('Windows', () => {
  it('is refused, naming what does not hold there, with WSL 2 as the remedy', () => {
    const error = contractErrorOf(() => assertSupportedPlatform(platformFor('win32')));
    expect(error.code).toBe('refused');
    for (const missing of [
      'file modes',
      'group or other bits',
      'O_NOFOLLOW',
      'fsync of a folder',
      'process start times',
    ])
      expect(error.message).toContain(missing);
    expect(error.remedy).toBe(
      'run it in WSL 2, with its files on a Linux file system inside it (not on a Windows drive under /mnt)',
    );
  });

  it('is the only platform refused: Linux and other POSIX systems construct PrivateFiles', () => {
    for (const name of ['linux', 'darwin', 'freebsd'] as const)
      expect(assertSupportedPlatform(platformFor(name))).toBeUndefined();
    expect(new PrivateFiles(makeRoot()).root).toMatch(/^\//);
  });
});
