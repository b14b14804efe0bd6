// Another process's attempt to acquire a workspace: acquires once and prints
// {"acquire":"won"} (then releases) or {"acquire":"<ContractError code>","message":...}.
// Any other error ends it with a non-zero status (the parent asserts exit code 0).
//
// Usage: node acquirer.mjs '<plan as JSON>' ({ workspace, stateHome, config, endpoint, lockWaitMs? }).
import { writeSync } from 'node:fs';
import { ContractError } from '@leasehold/contracts';
import { acquireWorkspace, openWorkspace } from '@leasehold/coordination';

const plan = JSON.parse(process.argv[2]);

function say(message) {
  writeSync(1, `${JSON.stringify(message)}\n`);
}

const workspace = openWorkspace(plan.workspace, {
  stateHome: plan.stateHome,
  ...(plan.lockWaitMs === undefined ? {} : { lockWaitMs: plan.lockWaitMs }),
});
let lease;
try {
  lease = await acquireWorkspace(workspace, plan.config, plan.endpoint);
} catch (error) {
  if (!ContractError.is(error)) throw error;
  say({ acquire: error.code, message: error.message });
  process.exit(0);
}
await lease.release();
say({ acquire: 'won' });
