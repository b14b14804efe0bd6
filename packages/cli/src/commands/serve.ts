import { ContractError, placeOptions, type WaitState } from '@leasehold/contracts';
import {
  serveOwner,
  type HandOverDecision,
  type HandOverRequest,
  type ProvedDeadRecovery,
  type ServeOptions,
  type Serving,
} from '@leasehold/transport';
import { openBackend, withBackend } from '../backend.js';
import { workspaceOf, type CommandContext } from '../context.js';
import { durationOption, endpointOption, requireEtcd, wholeNumber } from '../options.js';
import { table, type Output } from '../output.js';
import { POLICY_BYTES } from '../policy.js';
import { provedGoneInWords } from './journal.js';

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
  return serveWorkspace(context, {
    onServing: (serving, stateHome) => announceReady(context.output, serving, stateHome),
  });
}

/** What a command adds to the owner's life cycle: `serve` announces itself, `run` also starts and stops its program. */
export interface OwnerPart {
  /** Called once the owner serves, with the state home it serves in. */
  readonly onServing: (serving: Serving, stateHome: string) => void;
  /** This command's own `serveOwner` options: `run` handles its stop signals itself, and stops its program before the release. */
  readonly options?: Pick<ServeOptions, 'signals' | 'signal' | 'beforeRelease'>;
  /** Awaited after serving failed (a lost lease, a stop that failed), before that is reported. */
  readonly onFailed?: () => Promise<void>;
}

/**
 * The owner life cycle of `serve` and `run`, from their command line: the
 * workspace, the state home's backend, `--endpoint`, `--compatibility`,
 * `--recover-dead`, `--replace-config`, `--watch-ms` and `--lease-ttl`. Answers 0 after a clean
 * stop and release, 4 after a lost lease, 1 after a stop that failed part-way;
 * throws what refused the start.
 */
export async function serveWorkspace(context: CommandContext, part: OwnerPart): Promise<number> {
  const { values } = context;
  const root = workspaceOf(context);
  const watchIntervalMs = wholeNumber(values['watch-ms'], '--watch-ms', 10) ?? 1000;
  const waitMs = durationOption(values.wait, '--wait');
  const line = waitMs === undefined ? undefined : waitingLine(context);
  const ttlSeconds = wholeNumber(values['lease-ttl'], '--lease-ttl', 1);
  endpointOption(values.endpoint);
  const opened = await openBackend(context, { ttlSeconds, creates: true });
  const { stateHome } = opened;
  return withBackend(
    context,
    async ({ backend, ownership, recovery }) => {
      if (ttlSeconds !== undefined) requireEtcd(backend, '--lease-ttl');
      return serveOn(
        context,
        root,
        stateHome,
        {
          ownership,
          watchIntervalMs,
          recovery,
          recoverDead: values['recover-dead'] === true,
          ...(waitMs === undefined || line === undefined ? {} : { waitMs, onWait: line.onWait }),
        },
        line === undefined
          ? part
          : {
              ...part,
              onServing: (serving, home) => {
                line.done();
                part.onServing(serving, home);
              },
            },
      ).finally(() => line?.done());
    },
    opened,
  );
}

/**
 * The `recovered` record and, for a person, what `--recover-dead` recovered before serving: the
 * workspace, each process proved gone and how, and the journal record (that `leasehold journal` reads).
 */
function announceRecovered(output: Output, root: string, { record, automatic }: ProvedDeadRecovery): void {
  output.record({ event: 'recovered', root, proved: automatic.proved, record });
  output.say(
    ...table([
      ['recovered', root],
      ['proved gone', provedGoneInWords(automatic)],
      ['record', record],
    ]),
    '',
  );
}

/**
 * What `--wait` shows while it waits: one line naming the holder (pid, command, host, since when)
 * and the time waited, rewritten in place on a terminal (`done` ends that line), printed again
 * only when it says something new otherwise; with --json, a `waiting` record each time the holder
 * or the line ahead changes.
 */
function waitingLine(context: CommandContext): { onWait: (wait: WaitState) => void; done: () => void } {
  const { output, streams } = context;
  const terminal = (streams.stderr as { isTTY?: boolean }).isTTY === true && !output.json;
  let last: string | undefined;
  let open = false;
  const onWait = ({ holder, ahead, waitedMs }: WaitState): void => {
    const who =
      holder === undefined
        ? `${ahead} waiter${ahead === 1 ? '' : 's'} ahead`
        : `held by pid ${holder.pid} on ${holder.host}${holder.commandLine === null ? '' : ` (${holder.commandLine.join(' ')})`} since ${holder.since}${ahead === 0 ? '' : `, ${ahead} waiting ahead`}`;
    if (who !== last) output.record({ event: 'waiting', ahead, ...(holder === undefined ? {} : { holder }) });
    const line = `waiting   ${who}; waited ${Math.round(waitedMs / 1000)} s`;
    if (terminal) {
      streams.stderr.write(`\r\u001b[K${line}`);
      open = true;
    } else if (who !== last) output.warn(line);
    last = who;
  };
  const done = (): void => {
    if (open) streams.stderr.write('\n');
    open = false;
  };
  return { onWait, done };
}

/** The `ready` record and, for a person, what serves, where, and how to stop it; `childPid` is `run`'s program. */
export function announceReady(output: Output, serving: Serving, stateHome: string, childPid?: number): void {
  output.record({
    event: 'ready',
    endpoint: serving.endpoint,
    epoch: serving.epoch,
    pid: serving.pid,
    ...(childPid === undefined ? {} : { childPid }),
  });
  output.say(
    ...table([
      ['serving', serving.root],
      ['endpoint', serving.endpoint],
      ['epoch', serving.epoch],
      ['pid', String(serving.pid)],
      ...(childPid === undefined ? [] : [['child pid', String(childPid)] as const]),
    ]),
    '',
    `Stop it with Ctrl-C, or: leasehold stop ${placeOptions(serving.root, stateHome)}`,
  );
}

async function serveOn(
  context: CommandContext,
  root: string,
  stateHome: string,
  options: Pick<ServeOptions, 'ownership' | 'watchIntervalMs' | 'recovery' | 'recoverDead' | 'waitMs' | 'onWait'>,
  part: OwnerPart,
): Promise<number> {
  const { output, values } = context;
  // Set by `onServing`, once the owner has acquired and serves.
  let serving = undefined as Serving | undefined;
  const onServing = (started: Serving) => {
    serving = started;
    part.onServing(started, stateHome);
  };
  const requested = endpointOption(values.endpoint);
  const endpoint = requested === undefined ? {} : { endpoint: requested };
  const compatibility = typeof values.compatibility === 'string' ? { compatibility: values.compatibility } : {};
  const replaceConfig = values['replace-config'] === true;
  try {
    const onRecovered = (recovered: ProvedDeadRecovery) => announceRecovered(output, root, recovered);
    // The command's owner always hands over; it says so first, with the asker's reason (`stop --ask --reason`).
    const onHandOverRequested = ({ reason }: HandOverRequest): HandOverDecision => {
      output.record({ event: 'hand-over', ...(reason === undefined ? {} : { reason }) });
      output.say(`asked     to hand ${root} over${reason === undefined ? '' : ` (reason: ${reason})`}; releasing`);
      return { decision: 'release' };
    };
    await serveOwner(root, {
      policy: POLICY_BYTES,
      ...options,
      ...part.options,
      onRecovered,
      onServing,
      onHandOverRequested,
      replaceConfig,
      ...endpoint,
      ...compatibility,
    });
  } catch (error) {
    // Not serving yet: acquire (or the bind) refused, reported as any error.
    if (serving === undefined) throw error;
    await part.onFailed?.();
    const { epoch, phase } = serving.lease.owner;
    if (phase !== 'idle') {
      // The stop had begun writing (phase `stopping`) when it failed: the remaining fences keep the workspace closed.
      output.warn(`leasehold: could not stop cleanly: ${describeError(error, 'error')}`);
      return 1;
    }
    // Our files changed under us: the listener is closed, and no file was touched.
    output.record({ event: 'lost', epoch, error: ContractError.is(error) ? error.code : 'unknown' });
    output.warn(
      `leasehold: lost the workspace (${describeError(error, 'the lease could not be asserted')}); stopped serving without touching its files`,
    );
    return LEASE_LOST_EXIT;
  }
  // serveOwner resolves only after a clean stop and release, so it served.
  output.record({ event: 'stopped', epoch: serving!.epoch });
  output.say(`stopped   ${root}`);
  return 0;
}
