import { ContractError } from '@leasehold/contracts';
import { ServiceCoordination } from '@leasehold/coordination';
import { stateHomeOf, workspaceOf, type CommandContext } from '../context.js';
import { callService } from '../transport.js';

/** How long `stop` waits for the workspace to read `stopped`. */
export const STOP_WAIT_MS = 15000;

const pause = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/** `leasehold stop`: an authenticated stop request, then a bounded wait until `inspect` answers `stopped`. */
export async function stop(context: CommandContext): Promise<number> {
  const root = workspaceOf(context, true);
  const coordination = new ServiceCoordination(root, { stateHome: stateHomeOf(context) });
  const before = coordination.inspect();
  if (before.status === 'stopped' || before.status === 'absent') {
    const epoch = before.status === 'stopped' ? before.epoch : null;
    context.output.record({ stopped: true, epoch });
    context.output.say(`stopped   ${root} (it was not running)`);
    return 0;
  }
  const access = coordination.localAccess();
  const reply = await callService(access.endpoint, access.capability, 'POST', '/v1/stop').catch(() => undefined);
  if (reply?.status !== 202) {
    throw new ContractError('unavailable', `${root}: the owner did not accept the stop request`);
  }
  const deadline = Date.now() + STOP_WAIT_MS;
  for (;;) {
    const now = coordination.inspect();
    if (now.status === 'stopped' && now.epoch === access.epoch) break;
    if (Date.now() >= deadline) throw new ContractError('unavailable', `${root}: not stopped after ${STOP_WAIT_MS} ms`);
    await pause(50);
  }
  context.output.record({ stopped: true, epoch: access.epoch });
  context.output.say(`stopped   ${root}`);
  return 0;
}
