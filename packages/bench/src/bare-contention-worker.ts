import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { bareCreate, bareLock, bareRemove, bareReplace } from './bare-files.js';
import { parseBareWorkerArgv, type WorkerCommand, type WorkerReport } from './contention-protocol.js';
import { documentBytes } from './fixtures.js';
import { elapsed, now } from './harness.js';

// One worker of section 6's bare floor: the publications of a reused
// workspace's acquire + release, as table 7's hook saw them in this run
// (`FsyncCount.sequence` of acquire.reused then release.reused), replayed
// with plain node:fs and nothing else: no reads, no checks, no hashes. Its
// own files are in its own folder; the registry's lock and table are one
// lock and one table shared by every bare worker, so the two table writes
// are serialised as Leasehold's are. What 16 of these at once take against
// one at a time is what this machine's disk and CPUs allow the cycle.

const options = parseBareWorkerArgv(process.argv.slice(2));
const staging = join(options.folder, 'staging');
const files = join(options.folder, 'files');
const lock = join(options.shared, 'table.lock');
const table = join(options.shared, 'table.json');
mkdirSync(staging, { recursive: true, mode: 0o700 });
mkdirSync(files, { recursive: true, mode: 0o700 });
const bytes = documentBytes();

interface Step {
  readonly on: 'lock' | 'table' | 'own';
  readonly kind: 'c' | 'r' | 'd';
  readonly syncFolder: boolean;
}

/** The tokens of `sequence`, checked to be a cycle this worker can repeat: it removes exactly what it created. */
function parseSequence(sequence: string): Step[] {
  const steps = sequence.split(' ').map((token): Step => {
    const match = /^(?:(lock|table):)?([crdCRD])$/.exec(token);
    if (match === null) throw new Error(`bare contention worker: cannot replay the publication ${token}`);
    const letter = match[2]!;
    return {
      on: (match[1] as 'lock' | 'table' | undefined) ?? 'own',
      kind: letter.toLowerCase() as Step['kind'],
      syncFolder: letter !== letter.toLowerCase(),
    };
  });
  let created = 0;
  for (const step of steps) {
    if (step.on === 'lock' && step.kind === 'r') throw new Error('bare contention worker: a lock replaced');
    if (step.on === 'table' && step.kind !== 'r') throw new Error('bare contention worker: the table only replaced');
    if (step.on !== 'own') continue;
    if (step.kind === 'c') created += 1;
    if (step.kind === 'd') created -= 1;
    if (created < 0) throw new Error('bare contention worker: a removal before its creation');
  }
  if (created !== 0) throw new Error('bare contention worker: the cycle does not remove what it creates');
  return steps;
}

const steps = parseSequence(options.sequence);
const pause = new Int32Array(new SharedArrayBuffer(4));
// A waiter polls the lock every 0.2 ms: near enough to the moment it is freed, without spinning on a CPU the holder needs.
const wait = (): void => void Atomics.wait(pause, 0, 0, 0.2);
let temps = 0;
const temp = (): string => join(staging, String((temps += 1)));

/** One cycle; answers when this worker held the lock, as the Leasehold workers do. */
function cycle(): [string, string][] {
  const held: [string, string][] = [];
  let linked = '';
  let created = 0;
  let removed = 0;
  let replaced = 0;
  for (const step of steps) {
    if (step.on === 'lock' && step.kind === 'c') {
      bareLock(lock, temp(), bytes, step.syncFolder, wait);
      linked = String(now());
    } else if (step.on === 'lock') {
      held.push([linked, String(now())]);
      bareRemove(lock, step.syncFolder);
    } else if (step.on === 'table') {
      bareReplace(table, temp(), bytes, step.syncFolder);
    } else if (step.kind === 'c') {
      bareCreate(join(files, `created-${(created += 1)}`), temp(), bytes, step.syncFolder);
    } else if (step.kind === 'r') {
      bareReplace(join(files, `replaced-${(replaced += 1)}`), temp(), bytes, step.syncFolder);
    } else {
      bareRemove(join(files, `created-${(removed += 1)}`), step.syncFolder);
    }
  }
  return held;
}

function send(report: WorkerReport): void {
  process.send?.(report);
}

process.on('disconnect', () => process.exit(0));
process.on('message', (command: WorkerCommand) => {
  if (command.type === 'exit') {
    process.disconnect();
    return;
  }
  if (command.type !== 'go') throw new Error(`bare contention worker: ${command.type} is for the Leasehold workers`);
  const start = now();
  const held = cycle();
  send({ type: 'done', outcome: 'ok', milliseconds: elapsed(start), held });
});
send({ type: 'ready' });
