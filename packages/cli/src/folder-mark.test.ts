import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Server, cleanEnv, cli, json, killAll, removeSandboxes, sandbox, type Sandbox } from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

afterEach(async () => {
  await killAll();
  removeSandboxes();
  expect(capabilityLeaks()).toEqual([]);
});

// The folder's own fence through the built command (SPEC 5.1a; docs/ownership.md, "The folder's
// own mark"): one owner per folder whatever the state home, as a person meets it with two HOMEs,
// sudo, or a CI job's own state home.

/** `--workspace W --state-home S`. */
function at(workspace: string, stateHome: string): string[] {
  return ['--workspace', workspace, '--state-home', stateHome];
}

/** A `serve --json` of `workspace` through `stateHome`, once it serves. */
async function served(workspace: string, stateHome: string): Promise<Server> {
  const server = new Server(at(workspace, stateHome), {});
  await server.ready();
  return server;
}

/** A repository with one commit, and what `git status --porcelain` says of it. */
function repository(box: Sandbox): { root: string; status: () => string } {
  const root = box.workspace('repository');
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', root, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { encoding: 'utf8' });
  git('init', '--quiet');
  writeFileSync(join(root, 'README'), 'tracked\n');
  git('add', 'README');
  git('commit', '--quiet', '-m', 'one');
  return { root, status: () => git('status', '--porcelain') };
}

describe("one owner per folder, whatever the state home (the folder's own mark)", () => {
  it('two state homes: the second serve is refused naming the first, and status there says running through it; git status never changes', async () => {
    const box = sandbox();
    const { root, status } = repository(box);
    const before = status();
    const ciState = join(box.folder, 'ci-state');
    const server = await served(root, box.stateHome);
    expect(status()).toBe(before);

    const second = await cli(['serve', ...at(root, ciState)]);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`conflict: the folder is owned by pid ${server.pid}`);
    expect(second.stderr).toContain(`through state home ${box.stateHome}`);
    expect(second.stderr).toContain(`leasehold stop --workspace ${root} --state-home ${box.stateHome}`);

    // As under sudo: another HOME, whose default state home never saw the folder.
    const otherHome = join(box.folder, 'other-home');
    const asked = await cli(['status', '--workspace', root, '--json'], { env: cleanEnv({ HOME: otherHome }) });
    expect(asked.code).toBe(0);
    expect(json(asked)).toMatchObject({
      status: 'running',
      root,
      pid: server.pid,
      through: { stateHome: box.stateHome, backend: 'files', process: 'live' },
    });
    const words = await cli(['status', '--workspace', root], { env: cleanEnv({ HOME: otherHome }) });
    expect(words.stdout).toMatch(new RegExp(`^through +state home ${box.stateHome}, as `, 'm'));
    expect(words.stdout).toContain(`Stop it with: leasehold stop --workspace ${root} --state-home ${box.stateHome}`);

    const stopped = await cli(['stop', ...at(root, box.stateHome)]);
    expect(stopped.code).toBe(0);
    expect((await server.exit()).code).toBe(0);
    expect(status()).toBe(before);
    const next = await served(root, ciState);
    next.child.kill('SIGTERM');
    expect((await next.exit()).code).toBe(0);
    expect(status()).toBe(before);
  });

  it('eight serves racing over four state homes: exactly one serves', async () => {
    const box = sandbox();
    const root = box.workspace('raced');
    const homes = [0, 1, 2, 3].map((index) => join(box.folder, `home-${index}`));
    const racers = Array.from({ length: 8 }, (_, index) => new Server(at(root, homes[index % 4]!), {}));
    const outcomes = await Promise.all(
      racers.map((racer) =>
        racer.ready().then(
          () => 'served',
          () => 'refused',
        ),
      ),
    );
    expect(outcomes.filter((outcome) => outcome === 'served')).toHaveLength(1);
    for (const racer of racers.filter((_, index) => outcomes[index] === 'refused')) {
      const exit = await racer.exit();
      expect(exit.code, exit.stderr).toBe(1);
      // Refused by the winner's mark, or by its row in the same state home: another owner, live.
      expect(JSON.parse(exit.stdout.trim().split('\n').at(-1)!)).toMatchObject({ error: 'conflict' });
    }
    const winner = racers[outcomes.indexOf('served')]!;
    winner.child.kill('SIGTERM');
    expect((await winner.exit()).code).toBe(0);
  });

  it('a folder inside an owned folder is refused through another state home', async () => {
    const box = sandbox();
    const root = box.workspace('outer');
    const inner = join(root, 'inner');
    mkdirSync(inner);
    const server = await served(root, box.stateHome);
    const refused = await cli(['serve', ...at(inner, join(box.folder, 'other'))]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`${inner} is inside ${root}, which is owned by pid ${server.pid}`);
    server.child.kill('SIGTERM');
    await server.exit();
  });

  for (const deleted of [false, true]) {
    it(`a crash in one state home is seen from another and cleared by the printed remedy${deleted ? ', the first state home deleted' : ''}`, async () => {
      const box = sandbox();
      const root = box.workspace('crashed');
      const first = join(box.folder, 'first');
      const second = join(box.folder, 'second');
      const server = await served(root, first);
      await server.kill9();
      if (deleted) rmSync(first, { recursive: true });
      const recoverIn = deleted ? second : first;

      const refused = await cli(['serve', ...at(root, second)]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('quarantine: ');
      expect(refused.stderr).toContain(`leasehold recover --workspace ${root} --state-home ${recoverIn}`);

      const asked = await cli(['status', ...at(root, second)]);
      expect(asked.code).toBe(3);
      const step = `leasehold recover --workspace ${root} --state-home ${recoverIn}`;
      expect(asked.stdout).toContain(`review what it left with: ${step}`);
      // The printed remedy, as printed: it shows the digest and the line that recovers.
      const review = await box.shell(step);
      expect(review.code, review.stderr).toBe(0);
      const recoverLine = /To recover: (leasehold recover .* --yes)$/m.exec(review.stdout)?.[1];
      expect(recoverLine, review.stdout).toBeDefined();
      const recovered = await box.shell(recoverLine!);
      expect(recovered.code, recovered.stderr).toBe(0);
      expect(existsSync(join(root, '.leasehold', 'owner.json'))).toBe(false);

      const next = await served(root, second);
      next.child.kill('SIGTERM');
      expect((await next.exit()).code).toBe(0);
    });
  }
});
