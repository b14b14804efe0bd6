// A waiter: acquires its workspace through the file backend, waiting up to plan.waitMs behind a
// live owner and the waiters that came first. Prints {"waiting":{ahead,holder}} when its wait is
// first told, {"acquired":"<epoch>"} once it owns the workspace, then on "release" releases,
// prints {"released":true} and exits 0. A refusal prints {"refused":code,"message"} and exits 3.
//
// Usage: node waiter.mjs '<plan as JSON>' ({ workspace, stateHome, config, endpoint, waitMs }).
import { writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileOwnership } from '@leasehold/coordination';

const plan = JSON.parse(process.argv[2]);

function say(message) {
  writeSync(1, `${JSON.stringify(message)}\n`);
}

const ownership = fileOwnership({ stateHome: plan.stateHome, lockWaitMs: 60_000 });
let told = false;
let lease;
try {
  lease = await ownership.acquire(plan.workspace, plan.config, {
    boundEndpoint: plan.endpoint,
    waitMs: plan.waitMs,
    onWait: ({ ahead, holder }) => {
      if (told) return;
      told = true;
      say({ waiting: { ahead, holder: holder ?? null } });
    },
  });
} catch (error) {
  say({ refused: error.code ?? 'error', message: error.message });
  process.exit(3);
}
say({ acquired: lease.owner.epoch });
const input = createInterface({ input: process.stdin });
for await (const line of input) {
  if (line === 'release') {
    await lease.release();
    say({ released: true });
    break;
  }
}
input.close();
