import { ContractError } from '@leasehold/contracts';
import { serveOwner, type ServeOptions, type Serving } from '@leasehold/transport';
import { openBackend, requireEtcd, withBackend } from '../backend.js';
import { placeOptions, workspaceOf, type CommandContext } from '../context.js';
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
 * `/v1/status` and `/v1/stop`, and stops cleanly on SIGINT, SIGTERM, SIGHUP or an
 * authenticated stop (exit 0). A lost lease closes the listener and exits
 * non-zero without touching any file.
 */
export async function serve(context: CommandContext): Promise<number> {
  const { values } = context;
  const root = workspaceOf(context);
  const watchIntervalMs = wholeNumber(values['watch-ms'], '--watch-ms', 10) ?? 1000;
  const ttlSeconds = wholeNumber(values['lease-ttl'], '--lease-ttl', 1);
  const opened = openBackend(context, ttlSeconds);
  const { stateHome } = opened;
  return withBackend(context, async ({ backend, ownership }) => {
    if (ttlSeconds !== undefined) requireEtcd(backend, '--lease-ttl');
    return serveOn(context, root, stateHome, { ownership, watchIntervalMs });
  }, opened);
}

/** A whole-number option of at least `least`, or undefined when it is not given. */
function wholeNumber(value: string | boolean | undefined, option: string, least: number): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!Number.isInteger(number) || number < least) throw new ContractError('refused', `${option}: not a whole number of at least ${least}`);
  return number;
}

async function serveOn(context: CommandContext, root: string, stateHome: string, options: Pick<ServeOptions, 'ownership' | 'watchIntervalMs'>): Promise<number> {
  const { output, values } = context;
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
  const replaceConfig = values['replace-config'] === true;
  try {
    await serveOwner(root, { policy: POLICY_BYTES, stateHome, ...options, onServing, replaceConfig, ...(endpoint === undefined ? {} : { endpoint }) });
  } catch (error) {
    // Not serving yet: acquire (or the bind) refused, reported as any error.
    if (serving === undefined) throw error;
    const { epoch, phase } = serving.lease.owner;
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
