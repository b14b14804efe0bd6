import { ContractError } from '@leasehold/contracts';
import { ServiceCoordination } from '@leasehold/coordination';
import type { MutationStep } from '@leasehold/private-files';
import { Registry } from '@leasehold/registry';
import { parseWorkerArgv, type WorkerCommand, type WorkerReport } from './contention-protocol.js';
import { CONFIG } from './fixtures.js';
import { elapsed, now } from './harness.js';

// One contention worker: a process that owns one workspace root (disjoint
// from every other worker's) in a shared state home, with the DEFAULT lock
// wait, and runs one acquire + release each time the parent says `go`. The
// parent warms it up with untimed serial passes. Its only hook records when
// it held the registry lock (a function call per mutating system call).

const options = parseWorkerArgv(process.argv.slice(2));
const lockPath = new Registry(options.stateHome).lockPath;
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
const coordination = new ServiceCoordination(options.workspace, { stateHome: options.stateHome, hooks });

function send(report: WorkerReport): void {
  process.send?.(report);
}

function codeOf(error: unknown): string {
  if (ContractError.is(error)) {
    if (error.code !== 'busy') process.stderr.write(`contention worker ${process.pid}: ${error.code}: ${error.message}\n`);
    return error.code;
  }
  process.stderr.write(`contention worker ${process.pid}: ${String(error)}\n`);
  return 'error';
}

async function cycle(): Promise<string> {
  let lease;
  try {
    lease = await coordination.acquire(CONFIG, options.endpoint);
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

process.on('disconnect', () => process.exit(0));
process.on('message', (command: WorkerCommand) => {
  if (command.type === 'exit') {
    process.disconnect();
    return;
  }
  held = [];
  const start = now();
  void cycle().then((outcome) => send({ type: 'done', outcome, milliseconds: elapsed(start), held }));
});
send({ type: 'ready' });
