// One racer of an acquire race. Loads everything, prints {"ready":true}, then
// waits for the line "go" on stdin so that every racer starts at once; then
// acquires and prints {"outcome":"won"} or {"outcome":"<ContractError code>"}.
// A winner either releases at once (`then: "release"`) or holds the lease
// until the line "release" comes (`then: "hold"`); it prints {"released":true}
// and exits 0. A loser exits 0 at once.
//
// Usage: node racer.mjs '<plan as JSON>' (see RacerPlan in ../../src/races.test.ts).
import { writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { ContractError } from '@leasehold/contracts';
import { acquireWorkspace, openWorkspace } from '@leasehold/coordination';

const plan = JSON.parse(process.argv[2]);

function say(message) {
  writeSync(1, `${JSON.stringify(message)}\n`);
}

const input = createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();
async function waitFor(expected) {
  for (;;) {
    const next = await lines.next();
    if (next.done) throw new Error(`stdin closed before "${expected}"`);
    if (next.value === expected) return;
  }
}

const workspace = openWorkspace(plan.workspace, {
  stateHome: plan.stateHome,
  ...(plan.lockWaitMs === undefined ? {} : { lockWaitMs: plan.lockWaitMs }),
});
say({ ready: true });
await waitFor('go');
let lease;
try {
  lease = await acquireWorkspace(workspace, plan.config, plan.endpoint);
} catch (error) {
  if (!ContractError.is(error)) throw error;
  say({ outcome: error.code, message: error.message });
  input.close();
  process.exit(0);
}
say({ outcome: 'won' });
if (plan.then === 'hold') await waitFor('release');
await lease.release();
say({ released: true });
input.close();
