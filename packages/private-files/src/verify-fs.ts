import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ContractError } from '@leasehold/contracts';
import { fileSystemOf, type FileSystem } from './file-systems.js';
import type { FileSnapshot } from './file-reads.js';
import { PrivateFiles } from './private-files.js';
import { counterBytes, counterOf } from './verify-fs-counter.js';

/** How many racing processes and seconds `verifyFileSystem` runs, and how it starts a worker. */
export interface VerifyFileSystemOptions {
  /** Racing processes, 2 to 64 (default 4). */
  readonly processes?: number;
  /** Seconds each races, 1 to 600 (default 5). */
  readonly seconds?: number;
  /**
   * The command line that starts one worker, a process that calls `verifyFileSystemWorker()`
   * (default: `node` running this package's worker module). A program bundled with this package,
   * where that module is not beside it, names itself here.
   */
  readonly worker?: readonly string[];
}

/** What `verifyFileSystem` saw. */
export interface FileSystemVerification {
  readonly fileSystem: FileSystem;
  readonly processes: number;
  readonly seconds: number;
  /** Compare-and-swap increments the workers made, in all. */
  readonly increments: number;
  /** The counter's value at the end. */
  readonly finalValue: number;
  /** `increments - finalValue`: increments another process's write undid (0 when the guarantees hold). */
  readonly lostUpdates: number;
  /** Reads whose bytes were not one whole counter document. */
  readonly tornReads: number;
  /** The first few errors other than `conflict`, as `code: message`, or a worker's own failure. */
  readonly errors: string[];
  /** No lost update, no torn read and no error. */
  readonly passed: boolean;
}

/** What one worker reports on its stdout, as one line of JSON. */
interface Tally {
  increments: number;
  tornReads: number;
  readonly errors: string[];
}

/** What a worker is given, in the environment variable `JOB`. */
interface Job {
  readonly root: string;
  readonly seconds: number;
  /** The pid of the verifying process: a worker outliving it (killed with SIGKILL) stops, and removes the scratch folder. */
  readonly parent: number;
}

const JOB = 'LEASEHOLD_VERIFY_FS_JOB';
const COUNTER = 'counter';
const LOCK = 'lock';
/** How many errors a verification keeps: the first few say what went wrong. */
const ERRORS_KEPT = 5;
/** How long past its seconds a worker may take before it is killed and counted as hung. */
const GRACE_MS = 30_000;

/**
 * Races `processes` real processes for `seconds` on one counter file in a fresh private scratch
 * folder inside `folder` (`.verify-fs-<random>`, made with the folders above it when missing):
 * each takes a lock by exclusive `create`, `read`s the counter, `replace`s it with the next value
 * compared against that read, and `remove`s the lock (see `verifyFileSystemWorker`). The lock is
 * needed: `replace` compares just before its rename, so writers racing without one lose updates on
 * any file system. Where rename, link and exclusive create are seen by every process at once, no
 * increment is lost, no read is torn and nothing fails. The scratch folder is removed, and its
 * workers killed, however it ends.
 * @throws ContractError `refused` for `processes` outside 2..64 or `seconds` outside 1..600 (naming
 * no path, before anything is made); what `directory(path, true)` throws when the scratch folder
 * cannot be made.
 */
export async function verifyFileSystem(
  folder: string,
  options: VerifyFileSystemOptions = {},
): Promise<FileSystemVerification> {
  const processes = checkedOption('processes', options.processes ?? 4, 2, 64);
  const seconds = checkedOption('seconds', options.seconds ?? 5, 1, 600);
  const root = join(resolve(folder), `.verify-fs-${randomBytes(6).toString('hex')}`);
  const files = new PrivateFiles(root);
  try {
    files.directory(root, true);
    files.create(join(root, COUNTER), counterBytes(0));
    const worker = options.worker ?? [process.execPath, fileURLToPath(new URL('verify-fs-worker.js', import.meta.url))];
    const tallies = await race(worker, { root, seconds, parent: process.pid }, processes);
    return verification(fileSystemOf(folder), processes, seconds, tallies, finalCounter(files, root));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** `value` when it is a whole number from `least` to `most`; `refused` otherwise. */
function checkedOption(name: string, value: number, least: number, most: number): number {
  if (!Number.isInteger(value) || value < least || value > most)
    throw new ContractError('refused', `${name} ${value}: not a whole number from ${least} to ${most}`, {
      remedy: `give ${name} a whole number from ${least} to ${most}, or leave it out`,
    });
  return value;
}

/** The counter's value at the end, or what kept it from being read as one whole counter. */
function finalCounter(files: PrivateFiles, root: string): number | string {
  const counter = join(root, COUNTER);
  try {
    const last = files.read(counter);
    return (last === undefined ? undefined : counterOf(last.bytes)) ?? `${counter}: not one whole counter at the end`;
  } catch (error) {
    return described(error);
  }
}

/** The figures, from the workers' tallies and the counter's value at the end (or why it has none). */
function verification(
  fileSystem: FileSystem,
  processes: number,
  seconds: number,
  tallies: readonly Tally[],
  final: number | string,
): FileSystemVerification {
  const increments = tallies.reduce((sum, tally) => sum + tally.increments, 0);
  const finalValue = typeof final === 'number' ? final : 0;
  const tornReads = tallies.reduce((sum, tally) => sum + tally.tornReads, 0);
  const found = [...tallies.flatMap((tally) => tally.errors), ...(typeof final === 'string' ? [final] : [])];
  const errors = found.slice(0, ERRORS_KEPT);
  const lostUpdates = increments - finalValue;
  const passed = lostUpdates === 0 && tornReads === 0 && errors.length === 0;
  return { fileSystem, processes, seconds, increments, finalValue, lostUpdates, tornReads, errors, passed };
}

/** Starts the workers together and answers each one's tally; every worker is ended before it answers. */
async function race(worker: readonly string[], job: Job, processes: number): Promise<Tally[]> {
  const [command, ...args] = worker;
  const env = { ...process.env, [JOB]: JSON.stringify(job) };
  const children = Array.from({ length: processes }, () =>
    spawn(command!, args, { env, stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  const watchdog = setTimeout(() => children.forEach(kill), job.seconds * 1000 + GRACE_MS);
  try {
    return await Promise.all(children.map((child, index) => tallyOf(child, index + 1)));
  } finally {
    clearTimeout(watchdog);
    children.forEach(kill);
  }
}

function kill(child: ChildProcess): void {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/** The tally a worker printed, or its failure (how it ended, with its last line of stderr) as its one error. */
function tallyOf(child: ChildProcess, number: number): Promise<Tally> {
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve) => {
    child.once('error', (error) => resolve(failed(`worker ${number} could not start: ${error.message}`)));
    child.once('close', (code, signal) => {
      if (code === 0) {
        try {
          resolve(JSON.parse(stdout) as Tally);
          return;
        } catch {
          // Falls through: a worker that ended well but printed no tally failed all the same.
        }
      }
      const said =
        stderr
          .trim()
          .split('\n')
          .filter((line) => line.trim() !== '')
          .at(-1) ?? 'no output';
      resolve(failed(`worker ${number} ended with ${signal ?? `code ${code}`}: ${said}`));
    });
  });
}

function failed(error: string): Tally {
  return { increments: 0, tornReads: 0, errors: [error] };
}

/**
 * One racing worker of `verifyFileSystem`, in the process that started it: for the job's seconds,
 * takes the lock (an exclusive `create`, tried again while another holds it), reads the counter,
 * `replace`s it with the next value compared against that read, and removes the lock; then prints
 * its tally (one line of JSON) on stdout. Under the lock nothing else may change the counter, so a
 * `conflict` there is a failure too. It stops at its first error. When the verifying process is
 * gone (killed before it could end its workers), the worker removes the scratch folder and stops
 * at once, printing nothing: no one is left to read a tally.
 * @throws ContractError `refused` when this process was not started by `verifyFileSystem` (no job in its environment).
 */
export function verifyFileSystemWorker(): void {
  const text = process.env[JOB];
  if (text === undefined)
    throw new ContractError('refused', `${JOB} is not set: this is one racing worker of verifyFileSystem`, {
      remedy: 'call verifyFileSystem, which starts its workers itself',
    });
  const job = JSON.parse(text) as Job;
  const files = new PrivateFiles(job.root);
  const tally: Tally = { increments: 0, tornReads: 0, errors: [] };
  const until = Date.now() + job.seconds * 1000;
  while (Date.now() < until && tally.errors.length === 0) {
    if (process.ppid !== job.parent) {
      rmSync(job.root, { recursive: true, force: true });
      return;
    }
    try {
      const lock = heldLock(files, job.root);
      if (lock !== undefined) increment(files, job.root, lock, tally);
    } catch (error) {
      tally.errors.push(described(error));
    }
  }
  writeSync(1, `${JSON.stringify(tally)}\n`);
}

/** The lock's snapshot once this worker made it, or undefined while another worker holds it. */
function heldLock(files: PrivateFiles, root: string): FileSnapshot | undefined {
  const lock = join(root, LOCK);
  // One lstat: a held lock is not worth a staged, fsynced create that must fail.
  if (!files.unchanged(lock, undefined)) return undefined;
  try {
    return files.create(lock, new TextEncoder().encode(`${process.pid}\n`));
  } catch (error) {
    if (ContractError.is(error, 'conflict')) return undefined;
    throw error;
  }
}

/** Under the lock: the counter read, checked whole, replaced by the next value; the lock removed after. */
function increment(files: PrivateFiles, root: string, lock: FileSnapshot, tally: Tally): void {
  const counter = join(root, COUNTER);
  try {
    const snapshot = files.read(counter);
    if (snapshot === undefined) throw new Error(`${counter}: the counter is gone`);
    const n = counterOf(snapshot.bytes);
    if (n === undefined) tally.tornReads += 1;
    else {
      files.replace(counter, snapshot, counterBytes(n + 1));
      tally.increments += 1;
    }
  } finally {
    files.remove(join(root, LOCK), lock);
  }
}

function described(error: unknown): string {
  if (ContractError.is(error)) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
