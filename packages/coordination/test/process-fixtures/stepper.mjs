// A writer stopped at one chosen mutating step of its acquire or release: its
// beforeMutation hook watches for the step `at` ("<operation> <action> <path>")
// and, at it (or, with `after`, at the next step; with `after: n`, n steps later), prints {"at":{operation,action,path}}
// and then either kills its own process with SIGKILL (`then: "kill"`: no cleanup,
// no finally runs) or blocks on a synchronous read of stdin until the line "go"
// (`then: "pause"`: a live process between two steps, with nothing of the event
// loop running). Without a stop it runs on: after acquire it prints
// {"acquired":{"epoch":...}} and reads a line: "release" releases (printing
// {"released":true}), "exit" exits holding the lease. A stop that never came
// prints {"missed":true} and exits 1.
//
// Usage: node stepper.mjs '<plan as JSON>' (see StepperPlan in ../process-helpers.ts).
import { writeSync } from 'node:fs';
import { acquireWorkspace, openWorkspace } from '@leasehold/coordination';
import { readLineSync } from '@leasehold/test-utils';

const plan = JSON.parse(process.argv[2]);
let watching = plan.during === 'acquire';
let armed = 0; // steps still to pass before the stop, once `at` was seen
let stopped = false;

function say(message) {
  // Synchronous, so the line is out before the process dies or blocks.
  writeSync(1, `${JSON.stringify(message)}\n`);
}

function stop(step) {
  stopped = true;
  say({ at: { operation: step.operation, action: step.action, path: step.path } });
  if (plan.then === 'kill') process.kill(process.pid, 'SIGKILL');
  for (let line = readLineSync(); line !== 'go'; line = readLineSync());
}

const hooks = {
  beforeMutation(step) {
    if (!watching || stopped) return;
    if (armed > 0) {
      armed -= 1;
      if (armed === 0) stop(step);
      return;
    }
    if (`${step.operation} ${step.action} ${step.path}` !== plan.at) return;
    if (plan.after === true) armed = 1;
    else if (typeof plan.after === 'number' && plan.after > 0) armed = plan.after;
    else stop(step);
  },
};

const workspace = openWorkspace(plan.workspace, {
  stateHome: plan.stateHome,
  hooks,
  ...(plan.lockWaitMs === undefined ? {} : { lockWaitMs: plan.lockWaitMs }),
});
const lease = await acquireWorkspace(workspace, plan.config, plan.endpoint);
if (plan.during === 'acquire' && !stopped) {
  say({ missed: true });
  process.exit(1);
}
say({ acquired: { epoch: lease.registration.epoch } });
for (;;) {
  const line = readLineSync();
  if (line === 'exit') process.exit(0);
  if (line !== 'release') continue;
  watching = plan.during === 'release';
  await lease.release();
  if (plan.during === 'release' && !stopped) {
    say({ missed: true });
    process.exit(1);
  }
  say({ released: true });
  process.exit(0);
}
