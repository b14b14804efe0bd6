import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { bareCreate, bareLock, bareRemove, bareReplace } from './bare-files.js';
import { documentBytes } from './fixtures.js';
import { now } from './harness.js';

// The bare replay of a cycle's publications: `FsyncCount.sequence` (what
// table 7's hook saw, in order) made with plain node:fs and nothing else: no
// reads, no checks, no hashes. Its own files are in its own folder; the
// registry's lock and table are one lock and one table in a shared folder,
// so that replays in several processes serialise their table writes as
// Leasehold's do. Section 6's bare floor runs it in 16 processes; the system
// call count of section 7 runs it under strace.

interface Step {
  readonly on: 'lock' | 'table' | 'own';
  readonly kind: 'c' | 'r' | 'd';
  readonly syncFolder: boolean;
}

/** The tokens of `sequence`, checked to be a cycle that can be repeated: it removes exactly what it created. */
function parseSequence(sequence: string): Step[] {
  const steps = sequence.split(' ').map((token): Step => {
    const match = /^(?:(lock|table):)?([crdCRD])$/.exec(token);
    if (match === null) throw new Error(`bare replay: cannot replay the publication ${token}`);
    const letter = match[2]!;
    return {
      on: (match[1] as 'lock' | 'table' | undefined) ?? 'own',
      kind: letter.toLowerCase() as Step['kind'],
      syncFolder: letter !== letter.toLowerCase(),
    };
  });
  let created = 0;
  for (const step of steps) {
    if (step.on === 'lock' && step.kind === 'r') throw new Error('bare replay: a lock replaced');
    if (step.on === 'table' && step.kind !== 'r') throw new Error('bare replay: the table only replaced');
    if (step.on !== 'own') continue;
    if (step.kind === 'c') created += 1;
    if (step.kind === 'd') created -= 1;
    if (created < 0) throw new Error('bare replay: a removal before its creation');
  }
  if (created !== 0) throw new Error('bare replay: the cycle does not remove what it creates');
  return steps;
}

/** Where a replay works: its own folder, and the folder of the lock and table it shares. */
export interface ReplayPlace {
  readonly folder: string;
  readonly shared: string;
}

/**
 * One replayed cycle of `sequence` each time the answer is called; each call
 * answers when it held the lock: [linked, unlinked] pairs of `now()` as
 * decimal strings, from right before the link that took it to right before
 * its unlink, as the Leasehold workers' hook times registry.lock.
 */
export function bareReplay(place: ReplayPlace, sequence: string): () => [string, string][] {
  const staging = join(place.folder, 'staging');
  const files = join(place.folder, 'files');
  const lock = join(place.shared, 'table.lock');
  const table = join(place.shared, 'table.json');
  mkdirSync(staging, { recursive: true, mode: 0o700 });
  mkdirSync(files, { recursive: true, mode: 0o700 });
  const bytes = documentBytes();
  const steps = parseSequence(sequence);
  const pause = new Int32Array(new SharedArrayBuffer(4));
  // A waiter polls the lock every 0.2 ms: near enough to the moment it is freed, without spinning on a CPU the holder needs.
  const wait = (): void => void Atomics.wait(pause, 0, 0, 0.2);
  let temps = 0;
  const temp = (): string => join(staging, String((temps += 1)));

  return () => {
    const held: [string, string][] = [];
    let linked = '';
    let created = 0;
    let removed = 0;
    let replaced = 0;
    for (const step of steps) {
      if (step.on === 'lock' && step.kind === 'c') {
        bareLock(lock, temp(), bytes, step.syncFolder, wait, () => (linked = String(now())));
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
  };
}
