import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cleanUp, spawnChild } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import { removeSandboxes, sandbox } from '../test/helpers.js';

afterEach(async () => {
  await cleanUp();
  removeSandboxes();
});

// A program that embeds the command through `main` (the README's "Embedding the command") is
// never started again by it: the file-system check's racing workers are the command's own entry
// file, not `process.argv[1]`, which names the host.

const HOST = fileURLToPath(new URL('../test/fixtures/embedding-host.mjs', import.meta.url));

describe('a program that embeds main', () => {
  it('runs doctor --verify-fs once: its workers are the command, the host starts once', async () => {
    const box = sandbox();
    const counter = join(box.folder, 'starts');
    const host = spawnChild(
      HOST,
      ['doctor', '--verify-fs', '--processes', '2', '--seconds', '1', '--json', '--state-home', box.stateHome],
      { env: { ...process.env, HOST_STARTS: counter } },
    );
    const end = await host.closed;
    expect(end.code, end.stderr).toBe(0);
    expect(readFileSync(counter, 'utf8').trim().split('\n')).toEqual([String(host.pid)]);
    const verified = JSON.parse(host.lines.find((line) => line.includes('"verifyFs"'))!) as {
      verifyFs: { passed: boolean; processes: number; increments: number };
    };
    expect(verified.verifyFs).toMatchObject({ passed: true, processes: 2 });
    expect(verified.verifyFs.increments).toBeGreaterThan(0);
  });
});
