import { ContractError, type Ownership } from '@leasehold/contracts';
import { connect, type Connection } from '@leasehold/transport';
import { withBackend } from '../backend.js';
import { workspaceOf, type CommandContext } from '../context.js';

/** How long `stop` waits for the workspace to read `stopped`. */
const STOP_WAIT_MS = 15000;

const pause = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/**
 * `leasehold stop`: proves the owner live (`connect`, which waits out another
 * transaction of this workspace), sends the authenticated stop request, then
 * waits (bounded) until `inspect` answers `stopped` with that owner's epoch.
 */
export async function stop(context: CommandContext): Promise<number> {
  const root = workspaceOf(context, true);
  return withBackend(context, ({ ownership }) => stopOn(context, root, ownership));
}

async function stopOn(context: CommandContext, root: string, ownership: Ownership): Promise<number> {
  let connection: Connection;
  try {
    connection = await connect(root, { ownership });
  } catch (error) {
    const now = await ownership.inspect(root);
    if (now.status !== 'stopped' && now.status !== 'absent') throw error;
    const epoch = now.status === 'stopped' ? now.epoch : null;
    context.output.record({ stopped: true, epoch });
    context.output.say(`stopped   ${root} (it was not running)`);
    return 0;
  }
  const reply = await connection.request('POST', '/v1/stop').catch(() => undefined);
  if (reply?.status !== 202) {
    throw new ContractError('unavailable', `${root}: the owner did not accept the stop request`);
  }
  const deadline = Date.now() + STOP_WAIT_MS;
  for (;;) {
    const now = await ownership.inspect(root);
    if (now.status === 'stopped' && now.epoch === connection.epoch) break;
    if (Date.now() >= deadline) throw new ContractError('unavailable', `${root}: not stopped after ${STOP_WAIT_MS} ms`);
    await pause(50);
  }
  context.output.record({ stopped: true, epoch: connection.epoch });
  context.output.say(`stopped   ${root}`);
  return 0;
}
