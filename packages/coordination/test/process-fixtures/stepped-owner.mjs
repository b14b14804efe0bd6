// An owner that moves one step at each line of its stdin: it acquires its workspace and prints
// {"acquired":"<epoch>"}; on "stopping" it writes that phase and prints {"stopping":true}; on
// "release" it releases, prints {"released":true} and exits. Killed instead, it leaves its fence.
// Any error ends it with a non-zero status (the parent asserts exit code 0).
//
// Usage: node stepped-owner.mjs '<plan as JSON>' ({ workspace, stateHome, config, endpoint, lockWaitMs }).
import { writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { acquireWorkspace, openWorkspace } from '@leasehold/coordination';

const plan = JSON.parse(process.argv[2]);

function say(message) {
  writeSync(1, `${JSON.stringify(message)}\n`);
}

const workspace = openWorkspace(plan.workspace, { stateHome: plan.stateHome, lockWaitMs: plan.lockWaitMs });
const lease = await acquireWorkspace(workspace, plan.config, plan.endpoint);
say({ acquired: lease.registration.epoch });
const input = createInterface({ input: process.stdin });
for await (const line of input) {
  if (line === 'stopping') {
    lease.phase('stopping');
    say({ stopping: true });
  } else if (line === 'release') {
    await lease.release();
    say({ released: true });
    break;
  }
}
input.close();
