// A writer that crashes for real, or fails with an I/O error: runs one
// coordination operation with a beforeMutation hook that counts the mutating
// steps of that operation and
// - before step `killAt`, kills its own process with SIGKILL (no cleanup, no
//   finally, no exit handler runs); `killBefore: "<operation> <action>"` kills
//   it before the first step of that kind instead;
// - at step `failAt`, throws an Error with code `failCode` (EIO, ENOSPC) from
//   the hook, as the system call would; only that one hit throws, so the
//   rollback or retry that follows runs (and is reported) unhindered. The
//   operation's outcome is reported, then the process exits, so that every
//   holder it names is absent.
// Without either it is a dry run that reports every step and the total.
//
// Usage: node crasher.mjs '<plan as JSON>' (see CrashPlan in ../crash-helpers.ts).
// Operations: `acquire` (counted from the start), `phase` and `release` (an
// uncounted acquire first, then only the steps of `lease.phase('stopping')`
// or `lease.release()` are counted).
// Prints JSON lines: {"step":{n,operation,action,path}}; then {"done":true,"steps":N}
// (dry run and kill plans), or {"failed":{outcome:"rejected"|"resolved",code?,message?},"steps":N}.
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
    if (steps === plan.failAt) {
      throw Object.assign(new Error(`${plan.failCode}: injected before ${step.operation} ${step.action} ${step.path}`), {
        code: plan.failCode,
      });
    }
  },
};

const coordination = new ServiceCoordination(plan.workspace, {
  stateHome: plan.stateHome,
  hooks,
  ...(plan.lockWaitMs === undefined ? {} : { lockWaitMs: plan.lockWaitMs }),
});

async function operate() {
  if (plan.operation === 'acquire') return coordination.acquire(plan.config, plan.endpoint);
  const lease = await coordination.acquire(plan.config, plan.endpoint);
  counting = true;
  if (plan.operation === 'phase') lease.phase('stopping');
  else await lease.release();
  return lease;
}

if (plan.failAt === undefined) {
  await operate();
  counting = false;
  say({ done: true, steps });
  if (plan.killAt === 'end') process.kill(process.pid, 'SIGKILL');
} else {
  let failed;
  try {
    await operate();
    failed = { outcome: 'resolved' };
  } catch (error) {
    failed = { outcome: 'rejected', code: error?.code, message: error?.message };
  }
  counting = false;
  say({ failed, steps });
  // Exit with whatever it still holds: its holders are absent from now on.
  process.exit(0);
}
