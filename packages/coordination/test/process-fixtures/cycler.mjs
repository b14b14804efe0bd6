// A writer that keeps the registry busy: after the line "go" on stdin, it
// acquires and releases its own workspace `iterations` times, printing
// {"iteration":i} after each release and {"done":true,"iterations":n} at the end.
// Any error ends it with a non-zero status (the parent asserts exit code 0).
//
// Usage: node cycler.mjs '<plan as JSON>' (see CyclerPlan in ../../src/readers.test.ts).
import { writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { acquireWorkspace, openWorkspace } from '@leasehold/coordination';

const plan = JSON.parse(process.argv[2]);

function say(message) {
  writeSync(1, `${JSON.stringify(message)}\n`);
}

const input = createInterface({ input: process.stdin });
const workspace = openWorkspace(plan.workspace, { stateHome: plan.stateHome, lockWaitMs: plan.lockWaitMs });
say({ ready: true });
for await (const line of input) if (line === 'go') break;
input.close();
for (let iteration = 1; iteration <= plan.iterations; iteration += 1) {
  const lease = await acquireWorkspace(workspace, plan.config, plan.endpoint);
  lease.assert();
  await lease.release();
  say({ iteration });
}
say({ done: true, iterations: plan.iterations });
