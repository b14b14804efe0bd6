import { readdirSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnChild } from './child-process.js';
import { cleanUp } from './clean-up.js';
import { stopProcess } from './stopped-processes.js';

afterEach(cleanUp);

/** Each thread's `State:` line from `/proc/<pid>/task/<tid>/status`. */
function threadStates(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((thread) => /^State:\s+(.*)$/m.exec(readFileSync(`/proc/${pid}/task/${thread}/status`, 'utf8'))?.[1] ?? '');
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
