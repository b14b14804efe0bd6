import { ContractError } from '@leasehold/contracts';
import { serveOwner, type Serving } from '@leasehold/transport';
import { placeOptions, stateHomeOf, workspaceOf, type CommandContext } from '../context.js';
import { table } from '../output.js';
import { POLICY_BYTES } from '../policy.js';

/** Exit status of a server whose lease was lost: it stopped serving and touched nothing. */
const LEASE_LOST_EXIT = 4;

function describeError(error: unknown, otherwise: string): string {
  return ContractError.is(error) ? `${error.code}: ${error.message}` : otherwise;
}

/**
 * `leasehold serve`: the transport's owner life cycle for the workspace. It
 * binds the loopback listener, acquires with the bound endpoint, serves
 * `/v1/status` and `/v1/stop`, and stops cleanly on SIGINT, SIGTERM or an
 * authenticated stop (exit 0). A lost lease closes the listener and exits
 * non-zero without touching any file.
 */
export async function serve(context: CommandContext): Promise<number> {
  const { output, values } = context;
  const root = workspaceOf(context);
  const stateHome = stateHomeOf(context);
  const watchIntervalMs = Number(values['watch-ms'] ?? 1000);
  if (!Number.isInteger(watchIntervalMs) || watchIntervalMs < 10) {
    throw new ContractError('refused', '--watch-ms: not a whole number of at least 10');
  }
  // Set by `onServing`, once the owner has acquired and serves.
  let serving = undefined as Serving | undefined;
  const onServing = (started: Serving) => {
    serving = started;
    output.record({ event: 'ready', endpoint: started.endpoint, epoch: started.epoch, pid: started.pid });
    output.say(
      ...table([
        ['serving', root],
        ['endpoint', started.endpoint],
        ['epoch', started.epoch],
        ['pid', String(started.pid)],
      ]),
      '',
      `Stop it with Ctrl-C, or: leasehold stop ${placeOptions(root, stateHome)}`,
    );
  };
  const endpoint = typeof values.endpoint === 'string' ? values.endpoint : undefined;
  try {
    await serveOwner(root, { policy: POLICY_BYTES, stateHome, watchIntervalMs, onServing, ...(endpoint === undefined ? {} : { endpoint }) });
  } catch (error) {
    // Not serving yet: acquire (or the bind) refused, reported as any error.
    if (serving === undefined) throw error;
    const { epoch, phase } = serving.lease.registration;
    if (phase !== 'idle') {
      // The stop had begun writing (phase `stopping`) when it failed: the remaining fences keep the workspace closed.
      output.warn(`leasehold: could not stop cleanly: ${describeError(error, 'error')}`);
      return 1;
    }
    // Our files changed under us: the listener is closed, and no file was touched.
    output.record({ event: 'lost', epoch, error: ContractError.is(error) ? error.code : 'unknown' });
    output.warn(`leasehold: lost the workspace (${describeError(error, 'the lease could not be asserted')}); stopped serving without touching its files`);
    return LEASE_LOST_EXIT;
  }
  // serveOwner resolves only after a clean stop and release, so it served.
  output.record({ event: 'stopped', epoch: serving!.epoch });
  output.say(`stopped   ${root}`);
  return 0;
}
