import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cleanUp, makeTemporaryFolder, mountOn, mountsAllowed, untilGone } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import type * as library from './index.js';
import { fileSystemOf, verifyFileSystem, verifyFileSystemWorker, type FileSystemVerification } from './index.js';
import { counterOf } from './verify-fs-counter.js';

afterEach(cleanUp);

/** The built worker module, started by path: the sources here are TypeScript, which `node` does not run. */
const WORKER = [process.execPath, fileURLToPath(new URL('../dist/verify-fs-worker.js', import.meta.url))];

/** A verification that passed in `folder`: every increment counted, nothing torn, no error, no scratch folder left. */
function expectPassed(result: FileSystemVerification, folder: string, processes: number): void {
  expect(result).toMatchObject({ fileSystem: fileSystemOf(folder), processes, seconds: 1, lostUpdates: 0 });
  expect(result).toMatchObject({ tornReads: 0, errors: [], passed: true, finalValue: result.increments });
  expect(result.increments).toBeGreaterThan(0);
  expect(readdirSync(folder)).toEqual([]);
}

describe('verifyFileSystem', () => {
  it('passes in the temp folder, racing its processes, and removes its scratch folder', async () => {
    const folder = makeTemporaryFolder('verify-fs-');
    expectPassed(await verifyFileSystem(folder, { processes: 3, seconds: 1, worker: WORKER }), folder, 3);
  });

  it("starts the worker module beside it when given no worker (the built library's default)", async () => {
    const built = (await import(new URL('../dist/index.js', import.meta.url).href)) as typeof library;
    const folder = makeTemporaryFolder('verify-fs-default-');
    expectPassed(await built.verifyFileSystem(folder, { processes: 2, seconds: 1 }), folder, 2);
  });

  it('makes a folder that is not there yet, and the folders above it', async () => {
    const folder = join(makeTemporaryFolder('verify-fs-fresh-'), 'state', 'home');
    expectPassed(await verifyFileSystem(folder, { processes: 2, seconds: 1, worker: WORKER }), folder, 2);
  });

  it('fails with what a worker that cannot start says, and still removes its scratch folder', async () => {
    const folder = makeTemporaryFolder('verify-fs-no-worker-');
    const result = await verifyFileSystem(folder, { processes: 2, seconds: 1, worker: [join(folder, 'absent')] });
    expect(result).toMatchObject({ increments: 0, passed: false });
    expect(result.errors).toEqual([
      expect.stringMatching(/^worker 1 could not start: .*ENOENT/),
      expect.stringMatching(/^worker 2 could not start: .*ENOENT/),
    ]);
    expect(readdirSync(folder)).toEqual([]);
  });

  it('refuses processes outside 2..64 and seconds outside 1..600, with a remedy, before making anything', async () => {
    const folder = makeTemporaryFolder('verify-fs-options-');
    const cases = [{ processes: 1 }, { processes: 65 }, { processes: 2.5 }, { seconds: 0 }, { seconds: 601 }];
    for (const options of cases) {
      const name = Object.keys(options)[0]!;
      await expect(verifyFileSystem(folder, options)).rejects.toMatchObject({
        code: 'refused',
        message: expect.stringContaining(`${name} `),
        remedy: expect.stringContaining(`give ${name} a whole number`),
      });
    }
    expect(readdirSync(folder)).toEqual([]);
  });
});

/** The pids of the processes whose job names a scratch folder in `folder`: the racing workers of a verifier there. */
function workersIn(folder: string): number[] {
  const pids = readdirSync('/proc').filter((name) => /^[0-9]+$/.test(name));
  return pids.map(Number).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, 'latin1').includes(`LEASEHOLD_VERIFY_FS_JOB={"root":"${folder}/`);
    } catch {
      return false; // gone since it was listed
    }
  });
}

/** The value of the counter in `folder`'s one scratch folder, or undefined before there is one to read. */
function counterIn(folder: string): number | undefined {
  const [scratch] = readdirSync(folder);
  const counter = scratch === undefined ? undefined : join(folder, scratch, 'counter');
  return counter === undefined || !existsSync(counter) ? undefined : counterOf(readFileSync(counter));
}

describe('a verifier killed with SIGKILL', () => {
  it('leaves no worker and no scratch folder: its workers see it gone, remove the folder and stop', async () => {
    const folder = makeTemporaryFolder('verify-fs-killed-');
    const built = new URL('../dist/index.js', import.meta.url).href;
    const script = `import { verifyFileSystem } from ${JSON.stringify(built)};\nawait verifyFileSystem(${JSON.stringify(folder)}, { processes: 2, seconds: 600 });`;
    const verifier = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'ignore' });
    let workers: number[] = [];
    try {
      // Racing: both workers started, and increments made.
      while (workers.length < 2 || !((counterIn(folder) ?? 0) > 0)) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        workers = workersIn(folder);
      }
      verifier.kill('SIGKILL');
      await Promise.all(workers.map(untilGone));
      expect(readdirSync(folder)).toEqual([]);
    } finally {
      verifier.kill('SIGKILL');
      for (const pid of workersIn(folder)) process.kill(pid, 'SIGKILL');
    }
  });
});

describe('verifyFileSystemWorker', () => {
  it('refuses to run outside a verification, naming what starts it', () => {
    expect(() => verifyFileSystemWorker()).toThrow(
      expect.objectContaining({
        code: 'refused',
        message: 'LEASEHOLD_VERIFY_FS_JOB is not set: this is one racing worker of verifyFileSystem',
        remedy: 'call verifyFileSystem, which starts its workers itself',
      }),
    );
  });
});

describe.skipIf(!mountsAllowed())('verifyFileSystem on a fresh tmpfs', () => {
  it('passes', async () => {
    const folder = mountOn(makeTemporaryFolder('verify-fs-tmpfs-'), 'mount', '-t', 'tmpfs', 'tmpfs');
    const result = await verifyFileSystem(folder, { processes: 4, seconds: 1, worker: WORKER });
    expect(result.fileSystem.name).toBe('tmpfs');
    expectPassed(result, folder, 4);
  });
});

// bindfs passes every call through to the folder below, but the attributes it answers lag the
// calls that change them. With its caches on, the lock a worker just made (linked from its staged
// temp, whose name is then unlinked) is still seen with two links: `refused`, "has more than one
// link" (now and then, with more processes, `conflict` instead: it changed while it was read). With
// the attribute and entry caches off (attr_timeout=0,entry_timeout=0) the link count is right, but
// the ctime the lock's `create` read lags the one the next lstat answers, so its holder cannot
// remove it by compare-and-swap: `conflict`, under the lock, where nothing else may change it. The
// verifier fails either way, at Leasehold's own checks, before an update is lost or a read torn.
const BINDFS_RUNS = [
  { options: [], error: /^(refused: .*\/lock: has more than one link|conflict: .*\/lock: changed while it was read)$/ },
  { options: ['-o', 'attr_timeout=0,entry_timeout=0'], error: /^conflict: .*\/lock: changed since it was read$/ },
];

describe.skipIf(!mountsAllowed('bindfs'))('verifyFileSystem on a bindfs FUSE passthrough', () => {
  for (const { options, error } of BINDFS_RUNS) {
    it(`fails at the lock (${options.join(' ') || 'caches on'})`, async () => {
      const parent = makeTemporaryFolder('verify-fs-fuse-');
      mkdirSync(join(parent, 'source'));
      const folder = mountOn(parent, 'bindfs', ...options, join(parent, 'source'));
      const result = await verifyFileSystem(folder, { processes: 2, seconds: 1, worker: WORKER });
      expect(result).toMatchObject({ fileSystem: { name: 'fuse', proven: false }, processes: 2, passed: false });
      expect(result).toMatchObject({ lostUpdates: 0, tornReads: 0 });
      expect(result.errors).toEqual([expect.stringMatching(error)]);
      expect(readdirSync(folder)).toEqual([]);
    });
  }
});
