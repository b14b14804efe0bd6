import { closeSync, openSync, unlinkSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileOwnership } from '@leasehold/coordination';
import { parseHandoverWorkerArgv, type WorkerCommand, type WorkerReport } from './contention-protocol.js';
import { CONFIG } from './fixtures.js';
import { now } from './harness.js';

// One of section 11's two hand-over processes: the owner holds and lets go, the waiter waits and
// takes over. Through Leasehold, the workspace with a waiting acquire; bare, a plain file taken by
// an exclusive create, tried again every 250 ms (a waiting acquire's own look-again interval when
// no notification wakes it). Each timestamp is taken as soon as the release or acquire returned.

const options = parseHandoverWorkerArgv(process.argv.slice(2));
const ownership = fileOwnership({ stateHome: options.stateHome });
const LOOK_AGAIN_MS = 250;
/** Far beyond any hand-over: the wait never runs out in a sample. */
const WAIT_MS = 30_000;

/** How to let go of what this process holds. */
type LetGo = () => Promise<void>;
let held: LetGo | undefined;

function send(report: WorkerReport): void {
  process.send?.(report);
}

/** Takes the bare lock; throws EEXIST while another process holds it. */
function takeBare(): LetGo {
  closeSync(openSync(options.bareLock, 'wx'));
  return () => Promise.resolve(unlinkSync(options.bareLock));
}

/** Tries the bare lock every 250 ms until it is free; `waiting` once the first try failed. */
async function waitBare(waiting: () => void): Promise<LetGo> {
  for (;;) {
    try {
      return takeBare();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    waiting();
    await sleep(LOOK_AGAIN_MS);
  }
}

/** Acquires the workspace; with `waiting`, in line behind its owner until it lets go. */
async function takeLease(waiting?: () => void): Promise<LetGo> {
  const wait = waiting === undefined ? {} : { waitMs: WAIT_MS, onWait: waiting };
  const lease = await ownership.acquire(options.workspace, CONFIG, { boundEndpoint: options.endpoint, ...wait });
  return () => lease.release();
}

async function run(command: WorkerCommand): Promise<void> {
  if (command.type === 'hold') {
    held = command.bare ? takeBare() : await takeLease();
    send({ type: 'held' });
  } else if (command.type === 'release') {
    await held?.();
    const at = now();
    held = undefined;
    send({ type: 'released', at: String(at) });
  } else if (command.type === 'wait') {
    let told = false;
    const waiting = () => {
      if (!told) send({ type: 'waiting' });
      told = true;
    };
    const letGo = command.bare ? await waitBare(waiting) : await takeLease(waiting);
    const at = now();
    // Let go before answering, so that the next sample's owner finds the workspace free.
    await letGo();
    send({ type: 'acquired', at: String(at) });
  } else {
    throw new Error(`hand-over worker: ${command.type} is for the contention workers`);
  }
}

process.on('disconnect', () => process.exit(0));
process.on('message', (command: WorkerCommand) => {
  if (command.type === 'exit') process.disconnect();
  else void run(command);
});
send({ type: 'ready' });
