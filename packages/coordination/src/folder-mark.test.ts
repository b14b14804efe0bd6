import { execFileSync } from 'node:child_process';
import {
  chownSync,
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { encode, folderMarkPlaces, type ContractError } from '@leasehold/contracts';
import {
  cleanUp,
  codeOf,
  countsOf,
  handPlaces,
  loopbackEndpoint,
  makePlace,
  messageOf,
  mountOn,
  mountsAllowed,
  spawnPlanned,
  type TestPlace,
} from '@leasehold/test-utils';
import { currentProcess, describeUser } from '@leasehold/private-files';
import { ANY_PORT, BOUND, goneHolder, makeWorkspace, unchangedCodeOf } from '../test/functional-helpers.js';
import { OWNER_CONFIG, PROCESS_FIXTURES, stepAt, type StepperPlan } from '../test/process-helpers.js';
import { Checkout, acquireWorkspace, inspectWorkspace, openWorkspace, type Workspace } from './index.js';

afterEach(cleanUp);

// The folder's own fence (SPEC 5.1a; docs/ownership.md, "The folder's own mark"): one owner per
// folder whatever the state home, so a second state home (another HOME, sudo, a CI job's own) is
// refused a folder the first one owns, and told whose it is.

const OTHER_BOUND = 'http://127.0.0.1:40011';

/** The workspace `root` through the state home `name` of the place (a second HOME, say). */
function through(place: TestPlace, name: string, root: string): Workspace {
  return openWorkspace(root, { stateHome: join(place.base, name) });
}

async function refusalOf(run: () => Promise<unknown>): Promise<ContractError> {
  try {
    await run();
  } catch (error) {
    return error as ContractError;
  }
  throw new Error('not refused');
}

describe("the folder's own mark", () => {
  it('is published by acquire, readable by everyone, hidden from git, and removed by release', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'repository');
    const git = (...args: string[]) => execFileSync('git', ['-C', root, ...args], { encoding: 'utf8' });
    git('init', '--quiet');
    writeFileSync(join(root, 'tracked.txt'), 'tracked\n');
    git('-c', 'user.name=t', '-c', 'user.email=t@t', 'add', 'tracked.txt');
    git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '--quiet', '-m', 'one');
    const before = git('status', '--porcelain');

    const lease = await acquireWorkspace(through(place, 'state', root), ANY_PORT, BOUND);
    const places = folderMarkPlaces(root);
    const mark = JSON.parse(readFileSync(places.mark, 'utf8')) as Record<string, unknown>;
    const { epoch, pid, host, processStart } = lease.registration;
    expect(mark).toEqual({
      schema: 'leasehold.folder-mark/1',
      root,
      stateHome: join(place.base, 'state'),
      backend: 'files',
      epoch,
      pid,
      host,
      ...(processStart === undefined ? {} : { processStart }),
    });
    expect(statSync(places.folder).mode & 0o777).toBe(0o755);
    expect(statSync(places.mark).mode & 0o777).toBe(0o644);
    expect(readFileSync(places.ignore, 'utf8')).toMatch(/^\*$/m);
    expect(git('status', '--porcelain')).toBe(before);

    await lease.release();
    expect(existsSync(places.mark)).toBe(false);
    expect(git('status', '--porcelain')).toBe(before);
    // The dot-folder stays, as a tool's cache folder does, empty of marks.
    expect(existsSync(places.ignore)).toBe(true);
  });

  it('refuses a second state home while the first owns the folder, and lets it in once released', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'shared');
    const first = through(place, 'home-one', root);
    const second = through(place, 'home-two', root);
    const lease = await acquireWorkspace(first, ANY_PORT, BOUND);

    const refusal = await refusalOf(() => acquireWorkspace(second, ANY_PORT, OTHER_BOUND));
    expect(refusal.code).toBe('conflict');
    expect(refusal.message).toContain(`pid ${process.pid}`);
    expect(refusal.message).toContain(`state home ${first.places.stateHome}`);
    expect(refusal.remedy).toContain(`leasehold stop --workspace ${root} --state-home ${first.places.stateHome}`);
    // The refused state home wrote nothing: no row, no service folder.
    expect(existsSync(second.places.privateRoot)).toBe(false);
    expect(second.registry.list().entries).toEqual([]);

    expect(inspectWorkspace(second)).toMatchObject({
      status: 'unavailable',
      marked: {
        root,
        stateHome: first.places.stateHome,
        backend: 'files',
        epoch: lease.registration.epoch,
        pid: process.pid,
        process: 'live',
      },
    });

    await lease.release();
    expect(inspectWorkspace(second)).toEqual({ status: 'absent' });
    const next = await acquireWorkspace(second, ANY_PORT, OTHER_BOUND);
    expect(codeOf(() => next.assert())).toBe('no error');
    expect(await unchangedCodeOf(first.places.stateHome, () => acquireWorkspace(first, ANY_PORT, BOUND))).toBe(
      'conflict',
    );
    await next.release();
  });

  it('refuses a folder below a marked folder through another state home, and says whose it is', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'outer');
    const inner = join(root, 'inner');
    mkdirSync(inner);
    const lease = await acquireWorkspace(through(place, 'home-one', root), ANY_PORT, BOUND);
    const below = through(place, 'home-two', inner);
    const refusal = await refusalOf(() => acquireWorkspace(below, ANY_PORT, OTHER_BOUND));
    expect(refusal.code).toBe('conflict');
    expect(refusal.message).toContain(`${inner} is inside ${root}`);
    expect(inspectWorkspace(below)).toMatchObject({ status: 'unavailable', marked: { root, pid: process.pid } });
    await lease.release();
  });

  it("is quarantine once its holder is proved gone, naming the recovery in the mark's state home", async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'crashed');
    const holder = goneHolder();
    const elsewhere = join(place.base, 'home-one');
    mkdirSync(elsewhere);
    writeMark(root, { stateHome: elsewhere, ...holder });
    const refusal = await refusalOf(() => acquireWorkspace(through(place, 'home-two', root), ANY_PORT, BOUND));
    expect(refusal.code).toBe('quarantine');
    expect(refusal.remedy).toContain(`leasehold recover --workspace ${root} --state-home ${elsewhere}`);
    // Its state home gone, the recovery that removes it is this one's.
    rmSync(elsewhere, { recursive: true });
    const again = await refusalOf(() => acquireWorkspace(through(place, 'home-two', root), ANY_PORT, BOUND));
    expect(again.remedy).toContain(
      `leasehold recover --workspace ${root} --state-home ${join(place.base, 'home-two')}`,
    );
  });

  it("names another user's mark as theirs: conflict while its holder lives, quarantine once gone, its remedy run as that user", async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'sudoed');
    const elsewhere = join(place.base, 'root-home');
    mkdirSync(elsewhere);
    writeMark(root, { stateHome: elsewhere, ...currentProcess() });
    // As root under sudo would have left it, seen by a user: another uid's file (here, root's test gives it away).
    chownSync(folderMarkPlaces(root).mark, 65534, 65534);
    const live = await refusalOf(() => acquireWorkspace(through(place, 'home', root), ANY_PORT, BOUND));
    expect(live.code).toBe('conflict');
    expect(live.message).toContain(`as ${describeUser(65534)}`);
    expect(live.remedy).toContain(`run it as ${describeUser(65534)}, whose mark it is`);
    writeMark(root, { stateHome: elsewhere, ...goneHolder() }, true);
    chownSync(folderMarkPlaces(root).mark, 65534, 65534);
    const gone = await refusalOf(() => acquireWorkspace(through(place, 'home', root), ANY_PORT, BOUND));
    expect(gone.code).toBe('quarantine');
    expect(gone.remedy).toContain(`leasehold recover --workspace ${root} --state-home ${elsewhere}`);
    expect(gone.remedy).toContain(`run it as ${describeUser(65534)}`);
  });

  it('refuses a mark that is a link, a FIFO, a folder, malformed or writable by others, naming it, and never hangs', async () => {
    const place = makePlace('coordination');
    const cases: [string, (mark: string) => void][] = [
      ['a symbolic link', (mark) => symlinkSync('/etc/hostname', mark)],
      ['a FIFO', (mark) => execFileSync('mkfifo', [mark])],
      ['a folder', (mark) => mkdirSync(mark)],
      ['malformed', (mark) => writeFileSync(mark, '{"schema":"leasehold.folder-mark/1"}', { mode: 0o644 })],
      [
        'writable by others',
        (mark) => {
          // A valid mark: its open mode alone is refused.
          writeMark(dirname(dirname(mark)), { stateHome: '/elsewhere', ...goneHolder() });
          chmodSync(mark, 0o666);
        },
      ],
    ];
    for (const [index, [name, make]] of cases.entries()) {
      const root = makeWorkspace(place, `unsafe-${index}`);
      const places = folderMarkPlaces(root);
      mkdirSync(places.folder, { mode: 0o755 });
      make(places.mark);
      const workspace = through(place, 'state', root);
      const refusal = await refusalOf(() => acquireWorkspace(workspace, ANY_PORT, BOUND));
      expect(refusal.code, name).toBe('refused');
      expect(refusal.message, name).toContain(places.mark);
      expect(inspectWorkspace(workspace).status, name).toBe('unavailable');
      expect(workspace.registry.list().entries, name).toEqual([]);
    }
  });
});

describe.skipIf(!mountsAllowed())('a read-only workspace folder', () => {
  it('is refused with the reason, its row rolled back, nothing left in the folder', async () => {
    const place = makePlace('coordination');
    const root = mountOn(place.base, 'mount', '-t', 'tmpfs', '-o', 'ro', 'tmpfs');
    const workspace = through(place, 'state', root);
    const refusal = await refusalOf(() => acquireWorkspace(workspace, ANY_PORT, BOUND));
    expect(refusal.code).toBe('refused');
    expect(refusal.message).toContain('the file system is read-only');
    expect(workspace.registry.list().entries).toEqual([]);
    expect(readdirSync(root)).toEqual([]);
    expect(inspectWorkspace(workspace).status).toBe('absent');
  });
});

describe("a plain tool's checkout lock and the folder's mark", () => {
  it('obeys a mark of another state home, and holds the folder with its own while it holds the lock', async () => {
    const place = makePlace('coordination');
    const root = makeWorkspace(place, 'tooled');
    const homeOne = join(place.base, 'home-one');
    const homeTwo = join(place.base, 'home-two');
    const lease = await acquireWorkspace(through(place, 'home-one', root), ANY_PORT, BOUND);
    expect((await refusalOf(() => new Checkout(root, { stateHome: homeTwo }).acquire())).code).toBe('conflict');
    await lease.release();

    const handle = await new Checkout(root, { stateHome: homeOne }).acquire();
    expect(JSON.parse(readFileSync(folderMarkPlaces(root).mark, 'utf8'))).toMatchObject({
      stateHome: homeOne,
      epoch: handle.token,
      pid: process.pid,
    });
    handle.assertOwner();
    // In its own state home a tool holds no service; in another, the folder is owned.
    expect(inspectWorkspace(through(place, 'home-one', root)).status).toBe('stopped');
    expect(inspectWorkspace(through(place, 'home-two', root))).toMatchObject({
      status: 'unavailable',
      marked: { stateHome: homeOne },
    });
    expect((await refusalOf(() => acquireWorkspace(through(place, 'home-two', root), ANY_PORT, BOUND))).code).toBe(
      'conflict',
    );
    expect((await refusalOf(() => new Checkout(root, { stateHome: homeTwo }).acquire())).code).toBe('conflict');
    handle.release();
    expect(existsSync(folderMarkPlaces(root).mark)).toBe(false);
    const other = await new Checkout(root, { stateHome: homeTwo }).acquire();
    other.release();
  });
});

/** A mark written by hand, as a crash in another state home left it. */
function writeMark(
  root: string,
  owner: { stateHome: string; pid: number; host: string; processStart?: string | undefined },
  replace = false,
) {
  const places = folderMarkPlaces(root);
  mkdirSync(places.folder, { recursive: true, mode: 0o755 });
  if (replace) rmSync(places.mark);
  writeFileSync(
    places.mark,
    encode({
      schema: 'leasehold.folder-mark/1',
      root,
      backend: 'files',
      epoch: '00000000-0000-4000-8000-000000000001',
      ...owner,
    }),
    { mode: 0o644 },
  );
}

describe('processes racing acquire of one folder through several state homes', () => {
  it('8 processes over 4 state homes: exactly one owner, every other refused', async () => {
    const place = makePlace('process');
    const root = makeWorkspace(place, 'shared');
    const plans = Array.from({ length: 8 }, (_, index) => ({
      workspace: root,
      stateHome: join(place.base, `home-${index % 4}`),
      config: OWNER_CONFIG,
      endpoint: loopbackEndpoint(43_000 + index),
      then: 'hold' as const,
      lockWaitMs: 60_000,
    }));
    const racers = plans.map((plan) => spawnPlanned(PROCESS_FIXTURES, 'racer.mjs', plan));
    await Promise.all(racers.map((racer) => messageOf(racer, 'ready')));
    for (const racer of racers) racer.send('go');
    const outcomes = await Promise.all(
      racers.map(async (racer) => String((await messageOf(racer, 'outcome')).outcome)),
    );
    expect(countsOf(outcomes), racers.map((racer) => racer.lines.join('\n')).join('\n')).toEqual({
      won: 1,
      conflict: 7,
    });
    const winner = racers[outcomes.indexOf('won')]!;
    for (const [index, racer] of racers.entries()) {
      if (racer === winner) continue;
      expect(await racer.closed).toMatchObject({ code: 0, signal: null });
      const status = inspectWorkspace(openWorkspace(root, { stateHome: plans[index]!.stateHome }));
      expect(status.status).toBe('unavailable');
    }
    winner.send('release');
    await messageOf(winner, 'released');
    expect(await winner.closed).toMatchObject({ code: 0, signal: null });
    expect(existsSync(folderMarkPlaces(root).mark)).toBe(false);
  });
});

/** A point of an acquire through the first state home, where it is paused while another state home acquires. */
interface PausePoint {
  readonly name: string;
  readonly at: (places: { roots: string; markFolder: string; mark: string; checkoutLock: string }) => string;
  /** Who owns the folder in the end: the paused acquire (its mark was linked) or the other one. */
  readonly winner: 'paused' | 'other';
}

const PAUSE_POINTS: readonly PausePoint[] = [
  { name: 'before its row', at: (p) => stepAt('replace', 'rename', p.roots), winner: 'other' },
  { name: "before its mark's folder", at: (p) => stepAt('create', 'mkdir', p.markFolder), winner: 'other' },
  { name: "before its mark's link", at: (p) => stepAt('create', 'link', p.mark), winner: 'other' },
  { name: "after its mark's link", at: (p) => stepAt('create', 'fsync-directory', p.markFolder), winner: 'paused' },
  { name: 'before its checkout lock', at: (p) => stepAt('create', 'link', p.checkoutLock), winner: 'paused' },
];

describe('an acquire paused at each step while another state home acquires the same folder (forced interleavings)', () => {
  for (const point of PAUSE_POINTS) {
    it(`${point.name}: exactly one owns it, the other is refused (conflict)`, async () => {
      const place = makePlace('process');
      const root = makeWorkspace(place, 'contested');
      const first = join(place.base, 'home-one');
      const hand = handPlaces(first, root);
      const marks = folderMarkPlaces(root);
      const plan: StepperPlan = {
        workspace: root,
        stateHome: first,
        config: OWNER_CONFIG,
        endpoint: loopbackEndpoint(44_300),
        during: 'acquire',
        at: point.at({
          roots: hand.roots,
          markFolder: marks.folder,
          mark: marks.mark,
          checkoutLock: hand.checkoutLock,
        }),
        then: 'pause',
      };
      const paused = spawnPlanned(PROCESS_FIXTURES, 'stepper.mjs', plan);
      await messageOf(paused, 'at');
      const other = through(place, 'home-two', root);
      let lease: Awaited<ReturnType<typeof acquireWorkspace>> | undefined;
      let refusal: ContractError | undefined;
      try {
        lease = await acquireWorkspace(other, OWNER_CONFIG, loopbackEndpoint(44_301));
      } catch (error) {
        refusal = error as ContractError;
      }
      paused.send('go');
      const acquired = await Promise.race([
        messageOf(paused, 'acquired').then(() => true),
        paused.closed.then(() => false),
      ]);
      if (point.winner === 'other') {
        expect(lease, refusal?.message).toBeDefined();
        expect(acquired).toBe(false);
        const end = await paused.closed;
        expect(end.code).toBe(1);
        expect(end.stderr).toContain('conflict');
        // Its rollback took back its row: the first state home holds nothing of the folder.
        expect(inspectWorkspace(through(place, 'home-one', root))).toMatchObject({
          status: 'unavailable',
          marked: { stateHome: other.places.stateHome },
        });
        await lease!.release();
      } else {
        expect(refusal?.code).toBe('conflict');
        expect(lease).toBeUndefined();
        expect(acquired).toBe(true);
        paused.send('release');
        await messageOf(paused, 'released');
        expect((await paused.closed).code).toBe(0);
      }
      expect(existsSync(marks.mark)).toBe(false);
    });
  }
});
