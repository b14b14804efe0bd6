import { ContractError } from '@leasehold/contracts';
import { fileOwnership } from '@leasehold/coordination';
import type { MutationStep } from '@leasehold/private-files';
import { Registry } from '@leasehold/registry';
import { parseWorkerArgv, type WorkerCommand, type WorkerReport } from './contention-protocol.js';
import { CONFIG } from './fixtures.js';
import { elapsed, now } from './harness.js';

// One contention worker: a process that owns one workspace root (disjoint
// from every other worker's) in a shared state home, with the DEFAULT lock
// wait, and runs one acquire + release each time the parent says `go`, or
// cycles without pause from `churn` to `stop-churn` (the writers of the
// reader-availability measure). The parent warms it up with untimed serial
// passes. Its only hook records when it held the registry lock (a function
// call per mutating system call).

const options = parseWorkerArgv(process.argv.slice(2));
const lockPath = new Registry(options.stateHome).layout.registryLock;
// The only hook: when this worker links and unlinks the registry lock, so the
// parent can tell how much of the wall time the lock was held at all.
let held: [string, string][] = [];
let linked: bigint | undefined;
const hooks = {
  beforeMutation(step: MutationStep): void {
    if (step.path !== lockPath) return;
    if (step.operation === 'create' && step.action === 'link') linked = now();
    if (step.operation === 'remove' && step.action === 'unlink' && linked !== undefined) {
      held.push([String(linked), String(now())]);
      linked = undefined;
    }
  },
};
const ownership = fileOwnership({ stateHome: options.stateHome, hooks });

function send(report: WorkerReport): void {
  process.send?.(report);
}

function codeOf(error: unknown): string {
  if (ContractError.is(error)) {
    if (error.code !== 'busy')
      process.stderr.write(`contention worker ${process.pid}: ${error.code}: ${error.message}\n`);
    return error.code;
  }
  process.stderr.write(`contention worker ${process.pid}: ${String(error)}\n`);
  return 'error';
}

async function cycle(): Promise<string> {
  let lease;
  try {
    lease = await ownership.acquire(options.workspace, CONFIG, { boundEndpoint: options.endpoint });
  } catch (error) {
    return codeOf(error);
  }
  // A release that meets a busy registry is still this owner's to finish: it is retried, and reported as busy.
  let outcome = 'ok';
  for (;;) {
    try {
      await lease.release();
      return outcome;
    } catch (error) {
      const code = codeOf(error);
      if (code !== 'busy') return code;
      outcome = 'busy';
    }
  }
}

let churning = false;

/** Cycles until `stop-churn`, then reports what it did. */
async function churn(): Promise<void> {
  churning = true;
  const start = now();
  let cycles = 0;
  let busy = 0;
  let failed = 0;
  while (churning) {
    const outcome = await cycle();
    cycles += 1;
    if (outcome === 'busy') busy += 1;
    else if (outcome !== 'ok') failed += 1;
    if (cycles === 1) send({ type: 'churning' });
    held = []; // nobody reads the lock intervals of a churn
    // Let the parent's `stop-churn` in: a cycle that never waits for the lock yields to no macrotask.
    await new Promise((resolve) => setImmediate(resolve));
  }
  send({ type: 'churned', cycles, busy, failed, milliseconds: elapsed(start) });
}

process.on('disconnect', () => process.exit(0));
process.on('message', (command: WorkerCommand) => {
  if (command.type === 'exit') {
    process.disconnect();
    return;
  }
  if (command.type === 'churn') {
    void churn();
    return;
  }
  if (command.type === 'stop-churn') {
    churning = false;
    return;
  }
  held = [];
  const start = now();
  void cycle().then((outcome) => send({ type: 'done', outcome, milliseconds: elapsed(start), held }));
});
send({ type: 'ready' });
