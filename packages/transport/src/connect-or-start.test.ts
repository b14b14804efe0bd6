import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { START_CLAIMS_FOLDER } from '@leasehold/contracts';
import { currentProcess, ownerStatus } from '@leasehold/private-files';
import {
  connectedClients,
  handPlaces,
  jsonOf,
  killAndReap,
  killUnreaped,
  killDetached,
  logLines,
  loggedProcesses,
  messageOf,
  namesIn,
  spawnPlanned,
  spawnUnreaped,
  type ConnectedClient,
  type LoggedProcess,
  type SpawnedChild,
} from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  FIXTURES,
  capabilityOf,
  endTest,
  filesOf,
  inspectionOf,
  placeWithWorkspace,
  witness,
  type Place,
} from '../test/helpers.js';
import { ContractError, connect, connectOrStart, type WaitingOn } from './index.js';

const POLICY = '{"policy":"connectOrStart tests"}';
/** A bound far above what any start here takes: the tests wait on events, never on it. */
const PATIENT_MS = 60_000;

/** One test's place and the logs its starts and owners append to. */
interface Scene extends Place {
  readonly starts: string;
  readonly owners: string;
  readonly ownerErrors: string;
}

const scenes: Scene[] = [];

function makeScene(): Scene {
  const place = placeWithWorkspace();
  const scene = {
    ...place,
    starts: join(place.base, 'starts.log'),
    owners: join(place.base, 'owners.log'),
    ownerErrors: join(place.base, 'owner-errors.log'),
  };
  scenes.push(scene);
  return scene;
}

/** The start-claims folder's names, outside its staging folder: a claim or take-over marker left behind shows here. */
function claimFiles(scene: Scene): string[] {
  return namesIn(join(scene.stateHome, START_CLAIMS_FOLDER)).filter((name) => name !== '.staging');
}

/**
 * Writes by hand a claim document at `name` in the scene's start-claims folder, naming this process
 * (pid, host), with `processStart` as given: this process's own (a live maker), or another boot's
 * (a maker proved gone, whatever its pid now names). Answers its path.
 */
function handClaim(scene: Scene, name: string, claim: { token: string; processStart: string; since: string }): string {
  const folder = join(scene.stateHome, START_CLAIMS_FOLDER);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  const path = join(folder, name);
  const { pid, host } = currentProcess();
  writeFileSync(path, JSON.stringify({ schema: 'leasehold.start-claim/1', root: scene.root, pid, host, ...claim }), {
    mode: 0o600,
    flag: 'wx',
  });
  return path;
}

/** This process's start identity, as it would read on another boot. */
function anotherBoot(): string {
  return currentProcess().processStart!.replace(/^linux:[0-9a-f-]{36}:/, 'linux:00000000-0000-0000-0000-000000000000:');
}

/** Whether a recorded owner is still that process (its pid and start time). */
const isLive = (owner: LoggedProcess) => ownerStatus(owner.pid, owner.host, owner.processStart) === 'live';

afterEach(async () => {
  // The owners the scenes' clients launched detached, as each recorded itself in the scene's owners log.
  await killDetached(
    scenes.splice(0).flatMap((scene) => loggedProcesses(scene.owners)),
    isLive,
  );
  await endTest();
});

function spawnClient(scene: Scene, plan: Record<string, unknown> = {}): SpawnedChild {
  const base = {
    workspace: scene.root,
    stateHome: scene.stateHome,
    policy: POLICY,
    starts: scene.starts,
    owners: scene.owners,
    ownerErrors: scene.ownerErrors,
  };
  return spawnPlanned(FIXTURES, 'on-demand-client.mjs', { ...base, timeoutMs: PATIENT_MS, ...plan });
}

/** The started-owner fixture as a child of this process (a start() of this process, or an owner already there). */
function spawnStartedOwner(scene: Scene, compatibility?: string): SpawnedChild {
  const plan = {
    workspace: scene.root,
    stateHome: scene.stateHome,
    policy: POLICY,
    owners: scene.owners,
    ...(compatibility === undefined ? {} : { compatibility }),
  };
  return spawnPlanned(FIXTURES, 'started-owner.mjs', plan);
}

/** An owner of the scene's workspace, started in its own process, once it serves. */
async function servingOwner(scene: Scene, compatibility?: string): Promise<SpawnedChild> {
  const owner = spawnStartedOwner(scene, compatibility);
  await messageOf(owner, 'serving');
  return owner;
}

/** Each client's connection, once every one ended connected (their output kept for the secrets check). */
async function connectedOf(clients: readonly SpawnedChild[]): Promise<ConnectedClient[]> {
  const { connected, outputs } = await connectedClients(clients);
  witness(...outputs);
  return connected;
}

/** The ContractError `promise` rejects with (kept for the secrets scan). */
/** A call that must be the one to start the owner: `start` ran once, it serves, and no claim file is left. */
async function expectOneStartAndNoClaimLeft(scene: Scene): Promise<void> {
  let started = 0;
  const connection = await connectOrStart(scene.root, {
    ownership: filesOf(scene),
    timeoutMs: PATIENT_MS,
    start: () => {
      started += 1;
      spawnStartedOwner(scene);
    },
  });
  expect(started).toBe(1);
  expect(connection.status.pid).toBe(loggedProcesses(scene.owners)[0]!.pid);
  expect(claimFiles(scene)).toEqual([]);
  capabilityOf(scene);
}

async function rejectionOf(promise: Promise<unknown>): Promise<ContractError> {
  const error = await promise.then(
    () => new Error('it resolved'),
    (caught: unknown) => caught,
  );
  witness(error);
  if (!ContractError.is(error)) throw error;
  return error;
}

describe('connectOrStart across processes', () => {
  it('16 processes racing on one workspace run start() once in total, and all get the one live owner', async () => {
    const scene = makeScene();
    const clients = Array.from({ length: 16 }, () => spawnClient(scene));
    const connected = await connectedOf(clients);
    const owners = loggedProcesses(scene.owners);
    expect(logLines(scene.starts)).toHaveLength(1);
    expect(owners).toHaveLength(1);
    expect(new Set(connected.map(({ epoch }) => epoch)).size).toBe(1);
    expect(connected.map(({ pid }) => pid)).toEqual(clients.map(() => owners[0]!.pid));
    expect(connected.every((client) => !('compatibility' in client))).toBe(true);
    // The claim is released once the owner answers, and no take-over marker is left.
    expect(claimFiles(scene)).toEqual([]);
    const owner = await connect(scene.root, { ownership: filesOf(scene) });
    expect(owner.epoch).toBe(connected[0]!.epoch);
    capabilityOf(scene);
  });

  it('when the first starter is SIGKILLed mid-start, exactly one of the 15 others takes its claim over and starts the one owner', async () => {
    const scene = makeScene();
    const clients = Array.from({ length: 16 }, () =>
      spawnClient(scene, { hangFirst: join(scene.base, 'first-start') }),
    );
    const starting = await Promise.any(
      clients.map(async (client) => ({ client, message: await messageOf(client, 'starting') })),
    );
    const killed = starting.client;
    expect(starting.message.starting).toBe(killed.pid);
    expect((await killAndReap(killed)).signal).toBe('SIGKILL');
    const survivors = clients.filter((client) => client !== killed);
    const connected = await connectedOf(survivors);
    const starts = logLines(scene.starts).map(Number);
    expect(starts).toHaveLength(2);
    expect(starts[0]).toBe(killed.pid);
    expect(survivors.map((client) => client.pid)).toContain(starts[1]);
    expect(loggedProcesses(scene.owners)).toHaveLength(1);
    expect(new Set(connected.map(({ epoch }) => epoch)).size).toBe(1);
    expect(claimFiles(scene)).toEqual([]);
    capabilityOf(scene);
  });
});

describe('a start that cannot succeed ends at once, with why', () => {
  it('a started process that exits before an owner answers ends the call with its exit, not at the bound; no claim is left', async () => {
    const scene = makeScene();
    const refused = await rejectionOf(
      connectOrStart(scene.root, {
        ownership: filesOf(scene),
        timeoutMs: PATIENT_MS,
        start: () => spawn(process.execPath, ['-e', 'process.exit(3)'], { stdio: 'ignore' }),
      }),
    );
    expect(refused.code).toBe('unavailable');
    expect(refused.message).toMatch(
      /the process start\(\) launched \(pid \d+\) exited with code 3 before an owner answered/,
    );
    expect(refused.message).not.toMatch(/within \d+ ms/);
    expect(claimFiles(scene)).toEqual([]);
  });

  it('a launcher that exits 0 handed over: the call waits for the owner it launched', async () => {
    const scene = makeScene();
    const connection = await connectOrStart(scene.root, {
      ownership: filesOf(scene),
      timeoutMs: PATIENT_MS,
      start: () => {
        spawnStartedOwner(scene);
        return spawn(process.execPath, ['-e', 'process.exit(0)'], { stdio: 'ignore' });
      },
    });
    expect(connection.status.pid).toBe(loggedProcesses(scene.owners)[0]!.pid);
    capabilityOf(scene);
  });

  it('after a kill -9 of the owner, 8 clients racing a start without recoverDead all end quarantine naming the gone owner; nothing recovered, no claim left', async () => {
    const scene = makeScene();
    const [first] = await connectedOf([spawnClient(scene)]);
    const crashed = loggedProcesses(scene.owners)[0]!;
    expect(first!.pid).toBe(crashed.pid);
    await killDetached([crashed], isLive); // kill -9
    expect(isLive(crashed)).toBe(false);

    const clients = Array.from({ length: 8 }, () => spawnClient(scene));
    const errors = await Promise.all(clients.map((client) => messageOf(client, 'error')));
    for (const { error, message } of errors) {
      expect(error).toBe('quarantine');
      expect(message).toContain(
        `the fences of an owner whose process is gone, pid ${crashed.pid} on host ${crashed.host} (absent), remain`,
      );
    }
    // Each start it ran was refused by the owner it launched, which exited: none serves, none recovered.
    const starts = logLines(scene.starts).length;
    expect(starts).toBeGreaterThanOrEqual(2);
    expect(loggedProcesses(scene.owners)).toHaveLength(starts);
    expect(loggedProcesses(scene.owners).filter(isLive)).toEqual([]);
    expect((await inspectionOf(scene)).status).not.toBe('stopped');
    expect(claimFiles(scene)).toEqual([]);
    witness(...clients.flatMap((client) => client.lines));
  });
});

describe('connectOrStart and the start claim', () => {
  it('never takes over a claim whose maker lives, however long it holds it: the wait ends unavailable, and onWait named that maker', async () => {
    const scene = makeScene();
    const holder = spawnClient(scene, { hang: true });
    await messageOf(holder, 'starting');
    const waits: WaitingOn[] = [];
    let started = 0;
    const waited = connectOrStart(scene.root, {
      ownership: filesOf(scene),
      timeoutMs: 1500,
      start: () => {
        started += 1;
      },
      onWait: (waitingOn) => waits.push(waitingOn),
    });
    const error = await rejectionOf(waited);
    expect(error.code).toBe('unavailable');
    expect(error.message).toContain(`start claim of pid ${holder.pid} on host ${hostname()} (live)`);
    expect(waits).toEqual([
      { what: 'start-claim', pid: holder.pid, host: hostname(), since: expect.any(String) as string },
    ]);
    expect(started).toBe(0);
    expect(claimFiles(scene)).toHaveLength(1);

    // Its maker gone, the claim is taken over at once.
    await killAndReap(holder);
    await expectOneStartAndNoClaimLeft(scene);
  });

  it('never takes over an old claim whose maker lives: age proves nothing', async () => {
    const scene = makeScene();
    const claimName = `${handPlaces(scene.stateHome, scene.root).privateRootName}.json`;
    const since = '2020-01-01T00:00:00.000Z';
    const path = handClaim(scene, claimName, {
      token: randomUUID(),
      processStart: currentProcess().processStart!,
      since,
    });
    const before = readFileSync(path, 'utf8');
    const waits: WaitingOn[] = [];
    const error = await rejectionOf(
      connectOrStart(scene.root, {
        ownership: filesOf(scene),
        timeoutMs: 1000,
        start: () => void spawnStartedOwner(scene),
        onWait: (waitingOn) => waits.push(waitingOn),
      }),
    );
    expect(error.code).toBe('unavailable');
    expect(waits).toEqual([{ what: 'start-claim', pid: process.pid, host: hostname(), since }]);
    expect(readFileSync(path, 'utf8')).toBe(before);
    expect(loggedProcesses(scene.owners)).toEqual([]);
  });

  it('takes over a claim whose maker is proved gone, through the marker a taker killed before its replace left: nothing is left after', async () => {
    const scene = makeScene();
    const name = handPlaces(scene.stateHome, scene.root).privateRootName;
    const deadToken = randomUUID();
    const since = '2020-01-01T00:00:00.000Z';
    handClaim(scene, `${name}.json`, { token: deadToken, processStart: anotherBoot(), since });
    handClaim(scene, `${name}.takeover-${deadToken}.json`, { token: randomUUID(), processStart: anotherBoot(), since });
    await expectOneStartAndNoClaimLeft(scene);
  });

  it('refuses a claim file it cannot read as one, naming it, and starts nothing', async () => {
    const scene = makeScene();
    const folder = join(scene.stateHome, START_CLAIMS_FOLDER);
    mkdirSync(folder, { recursive: true, mode: 0o700 });
    const path = join(folder, `${handPlaces(scene.stateHome, scene.root).privateRootName}.json`);
    writeFileSync(path, '{"schema":"leasehold.start-claim/1"}', { mode: 0o600 });
    let started = 0;
    const error = await rejectionOf(
      connectOrStart(scene.root, {
        ownership: filesOf(scene),
        start: () => {
          started += 1;
        },
      }),
    );
    expect(error.code).toBe('refused');
    expect(error.path).toBe(path);
    expect(started).toBe(0);
    expect(jsonOf(path)).toEqual({ schema: 'leasehold.start-claim/1' });
  });

  it('releases the claim when start() throws, and rethrows its error; the next call starts', async () => {
    const scene = makeScene();
    const failure = new Error('the daemon binary is missing');
    await expect(
      connectOrStart(scene.root, {
        ownership: filesOf(scene),
        timeoutMs: PATIENT_MS,
        start: () => Promise.reject(failure),
      }),
    ).rejects.toBe(failure);
    expect(claimFiles(scene)).toEqual([]);
    const connection = await connectOrStart(scene.root, {
      ownership: filesOf(scene),
      timeoutMs: PATIENT_MS,
      start: () => void spawnStartedOwner(scene),
    });
    expect(connection.status.root).toBe(scene.root);
    capabilityOf(scene);
  });
});

describe("connectOrStart and an owner's process, judged as the backend judges it", () => {
  it('an owner that is a zombie (killed, never reaped) is gone: the call starts at once, never waiting on it', async () => {
    const scene = makeScene();
    const plan = { workspace: scene.root, stateHome: scene.stateHome, policy: POLICY };
    const { parent, pid } = await spawnUnreaped(process.execPath, [join(FIXTURES, 'owner.mjs'), JSON.stringify(plan)]);
    await parent.line((line) => line.includes('"serving"'));
    capabilityOf(scene);
    await killUnreaped(pid);
    // kill(pid, 0) still finds it; its start time, and so the backend's verdict, say it is gone.
    expect(process.kill(pid, 0)).toBe(true);
    expect(await inspectionOf(scene)).toMatchObject({ status: 'unavailable', owner: { pid, process: 'absent' } });
    const told: WaitingOn[] = [];
    const starting = new Error('start() ran');
    const call = connectOrStart(scene.root, {
      ownership: filesOf(scene),
      timeoutMs: PATIENT_MS,
      onWait: (waitingOn) => told.push(waitingOn),
      start: () => Promise.reject(starting),
    });
    await expect(call).rejects.toBe(starting);
    expect(told).toEqual([]);
    expect(claimFiles(scene)).toEqual([]);
    witness(...parent.lines);
  });
});

describe('connectOrStart and compatibility', () => {
  it("'refuse' (the default): conflict naming both strings, nothing started, the owner untouched", async () => {
    const scene = makeScene();
    const owner = await servingOwner(scene, 'hello/1');
    const before = await connect(scene.root, { ownership: filesOf(scene) });
    expect(before.status.compatibility).toBe('hello/1');
    let started = 0;
    const error = await rejectionOf(
      connectOrStart(scene.root, {
        ownership: filesOf(scene),
        compatibility: 'hello/2',
        start: () => {
          started += 1;
        },
      }),
    );
    expect(error.code).toBe('conflict');
    expect(error.message).toMatch(/"hello\/1".*"hello\/2"/);
    expect(started).toBe(0);
    expect((await connect(scene.root, { ownership: filesOf(scene) })).epoch).toBe(before.epoch);
    expect(owner.process.exitCode).toBeNull();
    capabilityOf(scene);
  });

  it("'replace': the old owner is stopped with the authenticated stop and exits; the caller's own start serves the new compatibility", async () => {
    const scene = makeScene();
    const old = await servingOwner(scene, 'hello/1');
    const before = await connect(scene.root, { ownership: filesOf(scene) });
    const connection = await connectOrStart(scene.root, {
      ownership: filesOf(scene),
      timeoutMs: PATIENT_MS,
      compatibility: 'hello/2',
      onIncompatible: 'replace',
      start: () => void spawnStartedOwner(scene, 'hello/2'),
    });
    expect((await messageOf(old, 'outcome')).outcome).toEqual({ reason: 'stop' });
    expect((await old.closed).code).toBe(0);
    expect(connection.status.compatibility).toBe('hello/2');
    expect(connection.epoch).not.toBe(before.epoch);
    expect(loggedProcesses(scene.owners).map(({ pid }) => pid)).toEqual([old.pid, connection.status.pid]);
    capabilityOf(scene);
  });

  it('a client process that needs another compatibility replaces the owner the others share', async () => {
    const scene = makeScene();
    const [first] = await connectedOf([spawnClient(scene, { ownerCompatibility: 'hello/1' })]);
    const [second] = await connectedOf([
      spawnClient(scene, { compatibility: 'hello/2', ownerCompatibility: 'hello/2', onIncompatible: 'replace' }),
    ]);
    expect(first).toMatchObject({ compatibility: 'hello/1' });
    expect(second).toMatchObject({ compatibility: 'hello/2' });
    expect(second!.epoch).not.toBe(first!.epoch);
    expect(loggedProcesses(scene.owners).map(({ pid }) => pid)).toEqual([first!.pid, second!.pid]);
    expect(logLines(scene.starts)).toHaveLength(2);
    capabilityOf(scene);
  });
});

describe('connectOrStart and its bounds', () => {
  it('refuses a bound that is not a finite number of milliseconds, naming it, before anything is read or written', async () => {
    const scene = makeScene();
    let started = 0;
    const cases = [
      ['timeoutMs', Number.NaN],
      ['timeoutMs', Number.POSITIVE_INFINITY],
      ['waitMs', Number.NaN],
      ['waitMs', -1],
      ['requestTimeoutMs', Number.NaN],
    ] as const;
    for (const [name, value] of cases) {
      const error = await rejectionOf(
        connectOrStart(scene.root, {
          ownership: filesOf(scene),
          [name]: value,
          start: () => {
            started += 1;
          },
        }),
      );
      expect(error).toMatchObject({
        code: 'refused',
        message: `connectOrStart: ${name} ${value}: not a number of milliseconds`,
        remedy: `give ${name} a finite number of milliseconds, 0 or more, or leave it out`,
      });
    }
    expect(started).toBe(0);
    expect(existsSync(join(scene.stateHome, START_CLAIMS_FOLDER))).toBe(false);
  });
});

describe('connectOrStart and its signal', () => {
  it('an already-aborted signal rejects with its reason before anything is read or written', async () => {
    const scene = makeScene();
    const reason = new Error('the user gave up');
    let started = 0;
    await expect(
      connectOrStart(scene.root, {
        ownership: filesOf(scene),
        signal: AbortSignal.abort(reason),
        start: () => {
          started += 1;
        },
      }),
    ).rejects.toBe(reason);
    expect(started).toBe(0);
    expect(existsSync(join(scene.stateHome, START_CLAIMS_FOLDER))).toBe(false);
  });

  it("aborted while it waits on another process's start claim: rejects with the reason, the claim untouched, nothing of its own left", async () => {
    const scene = makeScene();
    const holder = spawnClient(scene, { hang: true });
    await messageOf(holder, 'starting');
    const [claimName] = claimFiles(scene);
    const claimPath = join(scene.stateHome, START_CLAIMS_FOLDER, claimName!);
    const before = readFileSync(claimPath, 'utf8');
    const controller = new AbortController();
    const reason = new Error('the user gave up');
    const waits: WaitingOn[] = [];
    let started = 0;
    await expect(
      connectOrStart(scene.root, {
        ownership: filesOf(scene),
        timeoutMs: PATIENT_MS,
        signal: controller.signal,
        start: () => {
          started += 1;
        },
        onWait: (waitingOn) => {
          waits.push(waitingOn);
          controller.abort(reason);
        },
      }),
    ).rejects.toBe(reason);
    expect(waits).toEqual([
      { what: 'start-claim', pid: holder.pid, host: hostname(), since: expect.any(String) as string },
    ]);
    expect(started).toBe(0);
    expect(claimFiles(scene)).toEqual([claimName]);
    expect(readFileSync(claimPath, 'utf8')).toBe(before);
    await killAndReap(holder);
  });

  it('aborted while its own start() runs: rejects with the reason and removes the claim it held', async () => {
    const scene = makeScene();
    const controller = new AbortController();
    const reason = new Error('the user gave up');
    let claimedWhileStarting: string[] = [];
    await expect(
      connectOrStart(scene.root, {
        ownership: filesOf(scene),
        timeoutMs: PATIENT_MS,
        signal: controller.signal,
        start: () => {
          claimedWhileStarting = claimFiles(scene);
          controller.abort(reason);
          return new Promise<void>(() => {}); // a start that never returns
        },
      }),
    ).rejects.toBe(reason);
    expect(claimedWhileStarting).toHaveLength(1);
    expect(claimFiles(scene)).toEqual([]);
  });

  it('aborted while it waits for an owner that does not answer (a stopped process): rejects with the reason, no claim made', async () => {
    const scene = makeScene();
    const owner = await servingOwner(scene);
    process.kill(owner.pid, 'SIGSTOP');
    try {
      const controller = new AbortController();
      const reason = new Error('the user gave up');
      const waits: WaitingOn[] = [];
      await expect(
        connectOrStart(scene.root, {
          ownership: filesOf(scene),
          timeoutMs: PATIENT_MS,
          requestTimeoutMs: 200,
          signal: controller.signal,
          start: () => void spawnStartedOwner(scene),
          onWait: (waitingOn) => {
            waits.push(waitingOn);
            controller.abort(reason);
          },
        }),
      ).rejects.toBe(reason);
      expect(waits).toEqual([{ what: 'owner', pid: owner.pid, host: hostname(), since: expect.any(String) as string }]);
      expect(claimFiles(scene)).toEqual([]);
      expect(loggedProcesses(scene.owners)).toHaveLength(1);
    } finally {
      process.kill(owner.pid, 'SIGCONT');
    }
  });
});

describe("connectOrStart's waitMs: an incompatible owner waited on under 'refuse'", () => {
  it('the owner stops during the wait: the call starts its own, of its compatibility, and connects', async () => {
    const scene = makeScene();
    const old = await servingOwner(scene, 'hello/1');
    const waits: WaitingOn[] = [];
    const connection = await connectOrStart(scene.root, {
      ownership: filesOf(scene),
      timeoutMs: PATIENT_MS,
      waitMs: PATIENT_MS,
      compatibility: 'hello/2',
      start: () => void spawnStartedOwner(scene, 'hello/2'),
      onWait: (waitingOn) => {
        waits.push(waitingOn);
        // Told of the old owner: it lets go now, as its operator's Ctrl-C would.
        if (waitingOn.pid === old.pid) old.process.kill('SIGTERM');
      },
    });
    expect(waits).toEqual([{ what: 'owner', pid: old.pid, host: hostname(), since: expect.any(String) as string }]);
    expect((await messageOf(old, 'outcome')).outcome).toEqual({ reason: 'signal', signal: 'SIGTERM' });
    expect(connection.status.compatibility).toBe('hello/2');
    expect(loggedProcesses(scene.owners).map(({ pid }) => pid)).toEqual([old.pid, connection.status.pid]);
    capabilityOf(scene);
  });

  it('the owner stays: once waitMs passes, conflict naming both compatibilities and the wait; nothing started', async () => {
    const scene = makeScene();
    const owner = await servingOwner(scene, 'hello/1');
    const before = await connect(scene.root, { ownership: filesOf(scene) });
    const waits: WaitingOn[] = [];
    let started = 0;
    const error = await rejectionOf(
      connectOrStart(scene.root, {
        ownership: filesOf(scene),
        timeoutMs: PATIENT_MS,
        waitMs: 200,
        compatibility: 'hello/2',
        start: () => {
          started += 1;
        },
        onWait: (waitingOn) => waits.push(waitingOn),
      }),
    );
    expect(error.code).toBe('conflict');
    expect(error.message).toMatch(/"hello\/1".*"hello\/2"; waited \d+ ms for it to let go/);
    expect(waits).toEqual([{ what: 'owner', pid: owner.pid, host: hostname(), since: expect.any(String) as string }]);
    expect(started).toBe(0);
    expect((await connect(scene.root, { ownership: filesOf(scene) })).epoch).toBe(before.epoch);
    expect(claimFiles(scene)).toEqual([]);
  });

  it('timeoutMs ends the wait first: unavailable, naming the owner it waited on to let go', async () => {
    const scene = makeScene();
    const owner = await servingOwner(scene, 'hello/1');
    const error = await rejectionOf(
      connectOrStart(scene.root, {
        ownership: filesOf(scene),
        timeoutMs: 200,
        waitMs: PATIENT_MS,
        compatibility: 'hello/2',
        start: () => void spawnStartedOwner(scene, 'hello/2'),
      }),
    );
    expect(error.code).toBe('unavailable');
    expect(error.message).toContain(`the owner (pid ${owner.pid}) of compatibility "hello/1" to let go`);
    expect(loggedProcesses(scene.owners)).toHaveLength(1);
  });
});
