import { bareReplay } from './bare-replay.js';
import { parseBareWorkerArgv, type WorkerCommand, type WorkerReport } from './contention-protocol.js';
import { elapsed, now } from './harness.js';

// One worker of section 6's bare floor: the publications of a reused
// workspace's acquire + release, replayed bare (`bareReplay`) in its own
// folder, on the lock and table every bare worker shares. What 16 of these at
// once take against one at a time is what this machine's disk and CPUs allow
// the cycle; how long one held the bare lock is the floor of the registry
// lock's hold.

const options = parseBareWorkerArgv(process.argv.slice(2));
const cycle = bareReplay(options, options.sequence);

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
