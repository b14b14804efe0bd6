// A writer that crashes for real: runs one coordination operation with a
// beforeMutation hook that counts the mutating steps of that operation and,
// before step `killAt`, kills its own process with SIGKILL (no cleanup, no
// finally, no exit handler runs). `killBefore: "<operation> <action>"` kills
// it before the first step of that kind instead. Without either it is a dry
// run that reports every step and the total.
//
// Usage: node crasher.mjs '<plan as JSON>' (see CrashPlan in ../process-helpers.ts).
// Operations: `acquire` (counted from the start), `phase` and `release` (an
// uncounted acquire first, then only the steps of `lease.phase('stopping')`
// or `lease.release()` are counted).
// Prints JSON lines: {"step":{n,operation,action,path}}, then {"done":true,"steps":N}.
// With killAt "end" it prints done, then kills itself while still holding what it holds.
import { writeSync } from 'node:fs';
import { ServiceCoordination } from '@leasehold/coordination';

const plan = JSON.parse(process.argv[2]);
let counting = plan.operation === 'acquire';
let steps = 0;

function say(message) {
  // Synchronous, so the line is out before the process dies.
  writeSync(1, `${JSON.stringify(message)}\n`);
}

const hooks = {
  beforeMutation(step) {
    if (!counting) return;
    steps += 1;
    say({ step: { n: steps, operation: step.operation, action: step.action, path: step.path } });
    if (steps === plan.killAt || `${step.operation} ${step.action}` === plan.killBefore) process.kill(process.pid, 'SIGKILL');
  },
};

const coordination = new ServiceCoordination(plan.workspace, {
  stateHome: plan.stateHome,
  hooks,
  ...(plan.lockWaitMs === undefined ? {} : { lockWaitMs: plan.lockWaitMs }),
});
const lease = await coordination.acquire(plan.config, plan.endpoint);
if (plan.operation === 'phase') {
  counting = true;
  lease.phase('stopping');
} else if (plan.operation === 'release') {
  counting = true;
  await lease.release();
}
counting = false;
say({ done: true, steps });
if (plan.killAt === 'end') process.kill(process.pid, 'SIGKILL');
