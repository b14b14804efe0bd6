import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, treeOf } from '@leasehold/test-utils';
import { cli, json, killAll, removeSandboxes, sandbox } from '../test/helpers.js';

afterEach(async () => {
  await killAll();
  removeSandboxes();
  await cleanUp();
});

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string })
  .version;

describe('leasehold --version', () => {
  it("prints the command's own package version and exits 0", async () => {
    const result = await cli(['--version']);
    expect(result).toMatchObject({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
  });
});

describe('leasehold recover --digest D without --yes and no terminal to ask on', () => {
  it('is a usage error (exit 2) that prints the exact command with --yes, and changes nothing', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server } = await box.serve(workspace);
    await server.kill9();
    const review = json(await cli(['recover', ...box.place(workspace), '--json']));
    const digest = String(review.digest);
    const before = treeOf(box.stateHome);

    const human = await cli(['recover', ...box.place(workspace), '--digest', digest]);
    expect(human.code).toBe(2);
    expect(human.stderr).toContain(
      `To recover: leasehold recover --workspace ${workspace} --state-home ${box.stateHome} --digest ${digest} --yes`,
    );
    expect(human.stderr).not.toContain('leasehold doctor');
    const machine = await cli(['recover', ...box.place(workspace), '--digest', digest, '--json']);
    expect(machine.code).toBe(2);
    expect(json(machine)).toMatchObject({ error: 'usage' });
    expect(treeOf(box.stateHome)).toEqual(before);
  });
});
