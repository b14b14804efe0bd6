import { readdirSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnChild, spawnUnreaped } from './child-process.js';
import { cleanUp } from './clean-up.js';
import { killUnreaped, stopProcess } from './stopped-processes.js';

afterEach(cleanUp);

/** Each thread's `State:` line from `/proc/<pid>/task/<tid>/status`. */
function threadStates(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map(
    (thread) => /^State:\s+(.*)$/m.exec(readFileSync(`/proc/${pid}/task/${thread}/status`, 'utf8'))?.[1] ?? '',
  );
}

// A child whose main thread and two workers spin, each on a core of its own: the kind of process whose
// stop lags its SIGSTOP on a busy machine.
const SPINNING = `
const { Worker } = require('node:worker_threads');
for (let index = 0; index < 2; index += 1) new Worker('for (;;) {}', { eval: true });
process.stdin.on('data', (line) => process.stdout.write('answer ' + line));
setInterval(() => {}, 1);
console.log('ready');
`;

describe('stopProcess', () => {
  it('resolves only once every thread of the process is stopped, and SIGCONT makes it answer again', async () => {
    const child = spawnChild('-e', [SPINNING]);
    await child.line('ready');
    await stopProcess(child.pid);
    const states = threadStates(child.pid);
    expect(states.length).toBeGreaterThan(2);
    expect(states.every((state) => state.startsWith('T'))).toBe(true);
    child.process.kill('SIGCONT');
    child.send('after');
    expect(await child.line('answer after')).toBe('answer after');
  });
});

describe('spawnUnreaped and killUnreaped', () => {
  it('leaves a zombie: exited, its pid still found by kill(pid, 0), until cleanUp has its parent reap it', async () => {
    const { parent, pid } = await spawnUnreaped('sleep', ['1000']);
    expect(pid).not.toBe(parent.pid);
    await killUnreaped(pid);
    expect(readFileSync(`/proc/${pid}/status`, 'utf8')).toMatch(/^State:\s+Z/m);
    expect(process.kill(pid, 0)).toBe(true);
    await cleanUp();
    expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
  });

  it('cleanUp ends a child still running, and its parent reaps it', async () => {
    const { parent, pid } = await spawnUnreaped('sleep', ['1000']);
    await cleanUp();
    expect((await parent.closed).code).toBe(0);
    expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
  });
});
