import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BIN, cleanEnv, removeSandboxes, sandbox } from '../test/helpers.js';
import { invocationOf } from './invocation.js';

afterEach(removeSandboxes);

// A remedy is printed as the person can run it (SPEC 8): as the command was invoked. Run through
// npx or a package manager, where `leasehold` is not on the PATH, `leasehold stop …` would be
// `command not found`.

const NPM = 'npm/11.19.1 node/v20.20.2 linux x64 workspaces/false';
const PNPM = 'pnpm/10.34.9 npm/? node/v20.20.2 linux x64';

describe('invocationOf', () => {
  it('tells npx, pnpm exec, a pnpm bin run and a package script named leasehold from a plain leasehold', () => {
    expect(invocationOf({ npm_command: 'exec', npm_lifecycle_event: 'npx', npm_config_user_agent: NPM })).toBe(
      'npx leasehold',
    );
    expect(invocationOf({ npm_command: 'exec', npm_config_user_agent: PNPM })).toBe('pnpm exec leasehold');
    expect(invocationOf({ npm_command: 'run-script', npm_config_user_agent: PNPM })).toBe('pnpm leasehold');
    const script = { npm_command: 'run-script', npm_lifecycle_event: 'leasehold' };
    expect(invocationOf({ ...script, npm_config_user_agent: PNPM })).toBe('pnpm leasehold');
    expect(invocationOf({ ...script, npm_config_user_agent: NPM })).toBe('npm run leasehold --');
    expect(invocationOf({})).toBeUndefined();
    // Another script (a test run, `pnpm start`): the project's `leasehold` script when it has one, else the plain word.
    const box = sandbox();
    const withScript = join(box.folder, 'with.json');
    writeFileSync(withScript, JSON.stringify({ scripts: { start: 'x', leasehold: 'node leasehold.cjs' } }));
    const without = join(box.folder, 'without.json');
    writeFileSync(without, JSON.stringify({ scripts: { test: 'vitest run' } }));
    const other = { npm_command: 'run-script', npm_lifecycle_event: 'start', npm_config_user_agent: PNPM };
    expect(invocationOf({ ...other, npm_package_json: withScript })).toBe('pnpm leasehold');
    expect(invocationOf({ ...other, npm_package_json: without })).toBeUndefined();
  });
});

describe('the command run through npx and pnpm exec', () => {
  it('prints its next step and its remedies as invoked, and as leasehold when it is on the PATH', () => {
    const box = sandbox();
    const project = join(box.folder, 'project');
    mkdirSync(join(project, 'node_modules', '.bin'), { recursive: true });
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'project', version: '1.0.0' }));
    const shim = join(project, 'node_modules', '.bin', 'leasehold');
    writeFileSync(shim, `#!/bin/sh\nexec '${process.execPath}' '${BIN}' "$@"\n`);
    chmodSync(shim, 0o755);
    const workspace = box.workspace('ws');
    // Outside any package script, as a person at a shell runs it (`cleanEnv` drops npm's variables).
    const env = cleanEnv();
    const run = (command: string, args: readonly string[]) =>
      execFileSync(command, [...args, 'status', ...box.place(workspace)], {
        cwd: project,
        env,
        encoding: 'utf8',
      }).trim();
    const step = `serve ${box.place(workspace).join(' ')}`;
    // status exits 3 for a workspace that is not running: execFileSync throws with its output.
    const output = (command: string, args: readonly string[]) => {
      try {
        return run(command, args);
      } catch (error) {
        return String((error as { stdout: string }).stdout).trim();
      }
    };
    expect(output('npx', ['leasehold']).split('\n').at(-1)).toBe(`Start it with: npx leasehold ${step}`);
    expect(output('pnpm', ['exec', 'leasehold']).split('\n').at(-1)).toBe(`Start it with: pnpm exec leasehold ${step}`);
    expect(output(shim, []).split('\n').at(-1)).toBe(`Start it with: leasehold ${step}`);
    // An error's remedy too.
    const typo = spawnSync('npx', ['leasehold', 'stauts'], { cwd: project, env, encoding: 'utf8' });
    expect(typo.status).toBe(2);
    expect(typo.stderr).toContain('did you mean `npx leasehold status`?');
  });
});
