import { ContractError, placeOptions, type Inspection, type Ownership } from '@leasehold/contracts';
import { describeHolder } from '@leasehold/private-files';
import { connect, settledInspection, type Connection } from '@leasehold/transport';
import { withBackend } from '../backend.js';
import { workspaceOf, type CommandContext } from '../context.js';
import { coveringOf, unfenced } from '../covering.js';
import { RemedyError } from '../remedies.js';

/** How long `stop` waits for the workspace to read `stopped`. */
const STOP_WAIT_MS = 15000;

const pause = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/**
 * `leasehold stop`: proves the owner live (`connect`, which waits out another
 * transaction of this workspace), sends the authenticated stop request, then
 * waits (bounded) until `inspect` answers `stopped` with that owner's epoch.
 * Run inside a fenced workspace, it stops that workspace (as `status` names it).
 */
export async function stop(context: CommandContext): Promise<number> {
  const folder = workspaceOf(context, true);
  return withBackend(context, async ({ ownership, stateHome, host }) => {
    const asked = await settledInspection(ownership, folder);
    const { root, inside } = await coveringOf(ownership, folder, asked);
    if (root === folder && unfenced(asked)) return notRunning(context, folder, asked, { stateHome, inside: inside.map((entry) => entry.root) });
    return stopOn(context, root, ownership, { stateHome, host });
  });
}

/** Nothing to stop: said so (exit 0), naming the fenced workspaces inside the folder, if any. */
function notRunning(context: CommandContext, root: string, inspection: Inspection, { stateHome, inside }: { stateHome: string; inside: readonly string[] }): number {
  const epoch = inspection.status === 'stopped' ? inspection.epoch : null;
  context.output.record({ stopped: true, root, epoch, ...(inside.length === 0 ? {} : { inside }) });
  context.output.say(`stopped   ${root} (it was not running)`);
  if (inside.length > 0) context.output.say(`Workspaces inside it are registered; stop one with: leasehold stop ${placeOptions(inside[0]!, stateHome)}`);
  return 0;
}

async function stopOn(context: CommandContext, root: string, ownership: Ownership, where: { stateHome: string; host: string | undefined }): Promise<number> {
  let connection: Connection;
  try {
    connection = await connect(root, { ownership });
  } catch (error) {
    const now = await ownership.inspect(root);
    if (unfenced(now)) return notRunning(context, root, now, { stateHome: where.stateHome, inside: [] });
    throw cannotStop(root, now, where, error);
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
  context.output.record({ stopped: true, root, epoch: connection.epoch });
  context.output.say(`stopped   ${root}`);
  return 0;
}

/**
 * Why an owner the files name cannot be stopped from here, with a remedy that works in that state:
 * an owner whose process is gone is recovered (a serve would be refused), another host's is stopped there, a live
 * one that does not answer is waited for or ended.
 */
function cannotStop(root: string, now: Inspection, where: { stateHome: string; host: string | undefined }, error: unknown): unknown {
  const owner = 'owner' in now ? now.owner : undefined;
  if (owner === undefined) return error;
  const recover = `leasehold recover ${placeOptions(root, where.stateHome)}`;
  if (where.host !== undefined && owner.host !== where.host && now.status !== 'quarantined') {
    return new RemedyError('unavailable', `${root}: served on host ${owner.host}, out of reach from here`, `stop it there: leasehold stop on host ${owner.host}`);
  }
  const liveness = owner.process;
  if (now.status === 'quarantined' || liveness === 'absent') {
    return new RemedyError('quarantine', `${root}: its owner, ${describeHolder(owner, liveness)}, ${liveness === 'absent' ? 'is gone' : 'is quarantined'}: there is nothing to stop`, `review and release what it left with: ${recover}`);
  }
  return new RemedyError(
    'unavailable',
    `${root}: its owner, ${describeHolder(owner, liveness)}, does not answer the stop request`,
    `wait and try again; if it hangs, end that process (kill ${owner.pid}), then: ${recover}`,
  );
}
