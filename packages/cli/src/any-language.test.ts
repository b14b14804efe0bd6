import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { killAll, removeSandboxes, sandbox } from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

// The transport README's client for other languages (`leasehold status --json`, python3 and curl),
// run line for line as it is printed there against a live owner served by the built binary.

afterEach(async () => {
  await killAll();
  removeSandboxes();
  expect(capabilityLeaks()).toEqual([]);
});

/** The shell lines of the transport README's "From any language" section, as a user copies them. */
function readmeLines(): string {
  const manifest = fileURLToPath(import.meta.resolve('@leasehold/transport/package.json'));
  const readme = readFileSync(join(dirname(manifest), 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## From any language'));
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  if (block === null) throw new Error('no sh block in the "From any language" section');
  return block[1]!;
}

describe('a client in another language, as the transport README shows it', () => {
  it('finds the endpoint and the capability file with status --json, proves the epoch with curl, and stops the owner', async () => {
    const box = sandbox();
    const workspace = box.workspace('app');
    const { server, ready } = await box.serve(workspace);
    const lines = readmeLines();
    expect(lines).toContain('--workspace ~/src/app');
    const script = `set -e\n${lines.replace('--workspace ~/src/app', box.place(workspace).join(' '))}`;
    const ran = await box.shell(script);
    expect(ran.stderr).toBe('');
    expect(ran.code).toBe(0);
    // The status the first curl printed (its epoch is the capability file's), then the stop's 202 answer.
    const [status, stop] = ran.stdout
      .replace(/\}\{/g, '}\n{')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(status).toEqual({ epoch: ready.epoch, phase: 'idle', root: workspace, pid: server.pid });
    expect(stop).toMatchObject({ epoch: ready.epoch, stopping: true });
    expect((await server.exit()).code).toBe(0);
  });

  it('answers 401 to a wrong bearer and 421 to another Host, as the README says', async () => {
    const box = sandbox();
    const workspace = box.workspace('app');
    const { ready } = await box.serve(workspace);
    const port = new URL(ready.endpoint).port;
    const code = async (...args: string[]) =>
      (await box.shell(`curl -s -o /dev/null -w '%{http_code}' ${args.join(' ')}`)).stdout;
    expect(await code('-H "Authorization: Bearer not-the-capability"', `${ready.endpoint}/v1/status`)).toBe('401');
    expect(await code(`-H "Host: localhost:${port}"`, `${ready.endpoint}/v1/status`)).toBe('421');
  });
});
