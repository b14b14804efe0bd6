import {
  ContractError,
  placeOptions,
  type Inspection,
  type Ownership,
  type Recovery,
  type RecoveryView,
} from '@leasehold/contracts';
import { describeHolder } from '@leasehold/state-home';
import {
  askHandOver,
  connect,
  settledInspection,
  type Connection,
  type HandOverAccepted,
  type HandOverRequest,
} from '@leasehold/transport';
import { withBackend } from '../backend.js';
import { refuseUnknownFolder, workspaceOf, type CommandContext } from '../context.js';
import { coveringOf, unfenced } from '../covering.js';
import { handOverOption, stopTimeoutOption } from '../options.js';
import { endProgram, outlivingProgramIn, programInWords, reusedProgramPid } from '../outliving-program.js';
import { RemedyError } from '../remedies.js';

/** How long `stop` waits for the workspace to read `stopped` (but after an owner's `release-after`: see `waitReleased`). */
const STOP_WAIT_MS = 15000;

const pause = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/**
 * `leasehold stop`: proves the owner live (`connect`, which waits out another
 * transaction of this workspace), sends the authenticated stop request, then
 * waits (bounded) until `inspect` no longer names that owner (`waitReleased`).
 * Run inside a fenced workspace, it stops that workspace (as `status` names it). When the owner
 * crashed and the program it fenced the workspace with lives on, it ends that program instead.
 * With `--ask`, it asks the owner to hand over (`askHandOver`) instead of stopping it, and the owner decides.
 */
export async function stop(context: CommandContext): Promise<number> {
  const folder = workspaceOf(context, true);
  const stopTimeoutMs = stopTimeoutOption(context.values['stop-timeout']);
  const ask = handOverOption(context.values.ask, context.values.reason);
  return withBackend(context, async ({ ownership, recovery, stateHome, host }) => {
    const asked = await settledInspection(ownership, folder);
    refuseUnknownFolder(folder, asked);
    const { root, inside } = await coveringOf(ownership, folder, asked);
    if (root === folder && unfenced(asked))
      return notRunning(context, folder, asked, { stateHome, inside: inside.map((entry) => entry.root) });
    return stopOn(context, root, ownership, {
      stateHome,
      host,
      recovery,
      stopTimeoutMs,
      ...(ask === undefined ? {} : { ask }),
    });
  });
}

/** Nothing to stop: said so (exit 0), naming the fenced workspaces inside the folder, if any. */
function notRunning(
  context: CommandContext,
  root: string,
  inspection: Inspection,
  { stateHome, inside }: { stateHome: string; inside: readonly string[] },
): number {
  const epoch = inspection.status === 'stopped' ? inspection.epoch : null;
  context.output.record({ stopped: true, root, epoch, ...(inside.length === 0 ? {} : { inside }) });
  context.output.say(`stopped   ${root} (it was not running)`);
  if (inside.length > 0)
    context.output.say(
      `Workspaces inside it are registered; stop one with: leasehold stop ${placeOptions(inside[0]!, stateHome)}`,
    );
  return 0;
}

/**
 * Where `stopOn` acts, and how: the state home, this host's name on etcd, its recovery, `--stop-timeout` in ms,
 * and with `--ask` the hand-over request to send instead of a stop.
 */
interface StopPlace {
  readonly stateHome: string;
  readonly host: string | undefined;
  readonly recovery: Recovery;
  readonly stopTimeoutMs: number;
  readonly ask?: HandOverRequest;
}

async function stopOn(context: CommandContext, root: string, ownership: Ownership, where: StopPlace): Promise<number> {
  let connection: Connection;
  try {
    connection = await connect(root, { ownership });
  } catch (error) {
    const now = await ownership.inspect(root);
    if (unfenced(now)) return notRunning(context, root, now, { stateHome: where.stateHome, inside: [] });
    // A hand-over is asked of a live owner: with none to ask, it signals nothing (a stop ends a program left behind).
    const ended = where.ask === undefined ? await endOutlivingProgram(context, root, where) : undefined;
    if (ended !== undefined) return ended;
    throw cannotStop(root, now, where, error);
  }
  let deadline: number | undefined = Date.now() + STOP_WAIT_MS;
  if (where.ask === undefined) {
    const reply = await connection.request('POST', '/v1/stop').catch(() => undefined);
    if (reply?.status !== 202) {
      throw new ContractError('unavailable', `${root}: the owner did not accept the stop request`);
    }
  } else {
    const { decision } = await handedOver(context, root, connection, where);
    // Its current work takes what it takes: waited for as long as the owner's process is there.
    if (decision === 'release-after') deadline = undefined;
  }
  await waitReleased(root, ownership, connection.epoch, deadline, where);
  context.output.record({ stopped: true, root, epoch: connection.epoch });
  context.output.say(`stopped   ${root}`);
  return 0;
}

/**
 * Asks the owner to hand over, and says what it decided; a refusal is `conflict` with the owner's reason, and a
 * remedy naming this workspace and state home.
 */
async function handedOver(
  context: CommandContext,
  root: string,
  connection: Connection,
  where: StopPlace,
): Promise<HandOverAccepted> {
  let accepted: HandOverAccepted;
  try {
    accepted = await askHandOver(connection, where.ask);
  } catch (error) {
    if (!ContractError.is(error, 'conflict')) throw error;
    throw new RemedyError(
      'conflict',
      error.message,
      `wait until the owner is done and ask again, or stop it regardless: leasehold stop ${placeOptions(root, where.stateHome)}`,
      { cause: error },
    );
  }
  context.output.record({ decision: accepted.decision, root, epoch: connection.epoch });
  context.output.say(
    accepted.decision === 'release'
      ? `asked     ${root}: its owner hands it over now`
      : `asked     ${root}: its owner hands it over after its current work; waiting for it`,
  );
  return accepted;
}

/**
 * Waits until the files no longer name the owner of `epoch`: `stopped`, or another owner's already (one that
 * acquired right after the release). Bounded by `deadline`; without one, for as long as that owner's process is
 * there: one proved gone before it released is `quarantine`, with the recovery that follows.
 */
async function waitReleased(
  root: string,
  ownership: Ownership,
  epoch: string,
  deadline: number | undefined,
  where: StopPlace,
): Promise<void> {
  for (;;) {
    const now = await ownership.inspect(root);
    const owner = 'owner' in now ? now.owner : undefined;
    if (now.status === 'stopped' || now.status === 'absent' || (owner !== undefined && owner.epoch !== epoch)) return;
    if (owner?.process === 'absent') throw cannotStop(root, now, where, undefined);
    if (deadline !== undefined && Date.now() >= deadline)
      throw new ContractError('unavailable', `${root}: not stopped after ${STOP_WAIT_MS} ms`);
    await pause(50);
  }
}

/**
 * When the owner is gone but the program it fenced the workspace with lives on (`run` and its
 * watcher were killed): ends that program's group, SIGTERM then SIGKILL after `--stop-timeout`,
 * and says that the workspace is now the crashed owner's to recover (exit 0). Undefined when
 * there is no such program. A fence whose pid now names another process is said so, never signalled.
 */
async function endOutlivingProgram(
  context: CommandContext,
  root: string,
  { recovery, stateHome, stopTimeoutMs }: StopPlace,
): Promise<number | undefined> {
  let view: RecoveryView;
  try {
    view = await recovery.view(root);
  } catch {
    return undefined; // unreadable: what the files say is `cannotStop`'s
  }
  const recover = `leasehold recover ${placeOptions(root, stateHome)}`;
  const reused = reusedProgramPid(recovery, view);
  if (reused !== undefined) {
    throw new RemedyError(
      'quarantine',
      `${root}: its owner's process is gone, and the program it fenced the workspace with (pid ${reused.pid}) is gone: pid ${reused.pid} now names another process (another start time), which stop leaves alone`,
      `review and release what the owner left with: ${recover}`,
    );
  }
  const program = outlivingProgramIn(recovery, view);
  if (program === undefined) return undefined;
  if (program.holder.processStart === undefined) {
    // No start time on this platform: its pid alone cannot prove the process is still the program.
    throw new RemedyError(
      'quarantine',
      `${root}: its owner's process is gone, but the program it fenced the workspace with lives on: ${programInWords(program.record)}; this host cannot prove that pid by its start time, so stop does not signal it`,
      `make sure pid ${program.holder.pid} is still that program, end its process group (kill -TERM -${program.holder.pid}), then: ${recover}`,
    );
  }
  const signal = await endProgram(recovery, program, stopTimeoutMs);
  const how = {
    SIGTERM: 'by SIGTERM',
    SIGKILL: `by SIGKILL, still there ${stopTimeoutMs / 1000} s after SIGTERM`,
    none: 'by itself already (not signalled)',
  }[signal ?? 'none'];
  context.output.record({ stopped: false, root, program: { ...program.record, endedBy: signal ?? null } });
  context.output.say(
    `ended     ${programInWords(program.record)}, ${how}`,
    `Its owner's process is gone; review and release what it left with: ${recover}`,
  );
  return 0;
}

/**
 * Why an owner the files name cannot be stopped from here, with a remedy that works in that state:
 * an owner whose process is gone is recovered (a serve would be refused), another host's is stopped there, a live
 * one that does not answer is waited for or ended.
 */
function cannotStop(root: string, now: Inspection, where: StopPlace, error: unknown): unknown {
  const owner = 'owner' in now ? now.owner : undefined;
  if (owner === undefined) return error;
  const recover = `leasehold recover ${placeOptions(root, where.stateHome)}`;
  if (where.host !== undefined && owner.host !== where.host && now.status !== 'quarantined') {
    return new RemedyError(
      'unavailable',
      `${root}: served on host ${owner.host}, out of reach from here`,
      `stop it there: leasehold stop on host ${owner.host}`,
    );
  }
  const liveness = owner.process;
  if (now.status === 'quarantined' || liveness === 'absent') {
    return new RemedyError(
      'quarantine',
      `${root}: its owner, ${describeHolder(owner, liveness)}, ${liveness === 'absent' ? 'is gone' : 'is quarantined'}: there is nothing to stop`,
      `review and release what it left with: ${recover}`,
    );
  }
  return new RemedyError(
    'unavailable',
    `${root}: its owner, ${describeHolder(owner, liveness)}, does not answer the stop request`,
    `wait and try again; if it hangs, end that process (kill ${owner.pid}), then: ${recover}`,
  );
}
