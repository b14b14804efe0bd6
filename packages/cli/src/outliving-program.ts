import {
  ContractError,
  holdersNotProvedGone,
  placeOptions,
  shellQuote,
  type Holder,
  type Recovery,
  type RecoveryView,
} from '@leasehold/contracts';
import { outlivingProgram } from '@leasehold/recovery';
import { isErrno } from '@leasehold/state-home';

// After `leasehold run` died and its watcher too (a kill -9 of both, or a platform without one),
// its program can live on: the fence names it, so recovery refuses, and `run`, which would have
// ended it, is gone. Every command that looks at the workspace names it, with the one command
// that ends it (`leasehold stop`), and `stop` ends it only once it has proved it is that process.

/** The program a gone owner fenced its workspace with, as the commands show it (`--json` too). */
export interface ProgramRecord {
  readonly pid: number;
  /** Its command line, word for word, or null where this host cannot read it (not Linux). */
  readonly commandLine: readonly string[] | null;
  /** Its process group, or null where this host cannot read it. */
  readonly processGroup: number | null;
}

/** An outliving program: the process its fence names, and what this host shows of it now. */
export interface OutlivingProgram {
  readonly holder: Holder;
  readonly record: ProgramRecord;
}

/**
 * The program of `view` that outlived its owner (`outlivingProgram` of @leasehold/recovery), with
 * its command line and group as `recovery`, the backend's, shows them.
 */
export function outlivingProgramIn(recovery: Recovery, view: RecoveryView): OutlivingProgram | undefined {
  const holder = outlivingProgram(view);
  if (holder === undefined) return undefined;
  const { commandLine, processGroup } = recovery.fencedProcess(holder);
  return { holder, record: { pid: holder.pid, commandLine, processGroup } };
}

/**
 * The outliving program of `root`, from a recovery view (which changes nothing but dead
 * writers' staging leftovers); undefined too when the view cannot be read: the command then
 * says what else it found.
 */
export async function outlivingProgramOf(recovery: Recovery, root: string): Promise<OutlivingProgram | undefined> {
  try {
    return outlivingProgramIn(recovery, await recovery.view(root));
  } catch {
    return undefined;
  }
}

/** `python3 -m http.server (process group 4250)`, shell-quoted, or 'command line unknown' where this host cannot read it. */
export function commandInWords({ commandLine, processGroup }: ProgramRecord): string {
  if (commandLine === null || processGroup === null) return 'command line unknown';
  return `${commandLine.map(shellQuote).join(' ')} (process group ${processGroup})`;
}

/** `pid 4250: python3 -m http.server (process group 4250)`. */
export function programInWords(record: ProgramRecord): string {
  return `pid ${record.pid}: ${commandInWords(record)}`;
}

/**
 * The one command that ends the program: `leasehold stop`, which proves it by pid and start time
 * first. Where this host reads neither its start nor its group (not Linux), `stop` cannot prove it,
 * so a person checks it and ends its group by hand.
 */
export function programRemedy({ pid, processGroup }: ProgramRecord, root: string, stateHome: string): string {
  if (processGroup !== null) return `end it with: leasehold stop ${placeOptions(root, stateHome)}`;
  return `make sure pid ${pid} is still that program, end its process group (kill -TERM -${pid}), then: leasehold recover ${placeOptions(root, stateHome)}`;
}

/**
 * The companion `view`'s fence names, when every process the fences name is proved gone (the owner
 * crashed, and so did its program) but the companion's pid now names another process (another
 * start time: the pid was reused), which no command signals.
 */
export function reusedProgramPid(recovery: Recovery, view: RecoveryView): Holder | undefined {
  const holder = view.fences.find((fence) => fence.kind === 'companion')?.holder;
  if (holder === undefined || holdersNotProvedGone(view).length > 0) return undefined;
  return recovery.fencedProcess(holder).pidInUse ? holder : undefined;
}

/** How often `endProgram` looks whether the program is gone. */
const POLL_MS = 50;

/** How long `endProgram` waits for the program to be gone after SIGKILL, which cannot be ignored. */
const KILLED_WAIT_MS = 5000;

const pause = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/** Whether `holder` is still that very process: live by pid and start time, as `recovery` judges it. */
function provedLive(recovery: Recovery, holder: Holder): boolean {
  return holder.processStart !== undefined && recovery.fencedProcess(holder).verdict === 'live';
}

/**
 * Sends `signal` to the program's group (or to it alone when it leads none: not a group `run`
 * made), only while it is proved to be that process. False when it is not (gone, or its pid reused).
 */
function signalProved(recovery: Recovery, { holder, record }: OutlivingProgram, signal: NodeJS.Signals): boolean {
  // Proved right before each signal: while the program lives its pid, and its group's id, name it alone.
  if (!provedLive(recovery, holder)) return false;
  try {
    process.kill(record.processGroup === holder.pid ? -holder.pid : holder.pid, signal);
    return true;
  } catch (error) {
    if (isErrno(error, 'ESRCH')) return false;
    throw error;
  }
}

/**
 * Ends an outliving program as `run` would have: SIGTERM to its group, then SIGKILL after
 * `timeoutMs` if it is still there, each only while it is proved (by `recovery`, the backend's) to
 * be the process the fence names.
 * Answers the signal that ended it, or undefined when it was not signalled (it had ended, or its
 * pid names another process now).
 * @throws ContractError `unavailable` when it is still there after SIGKILL (`KILLED_WAIT_MS`).
 */
export async function endProgram(
  recovery: Recovery,
  program: OutlivingProgram,
  timeoutMs: number,
): Promise<'SIGTERM' | 'SIGKILL' | undefined> {
  if (!signalProved(recovery, program, 'SIGTERM')) return undefined;
  const deadline = Date.now() + timeoutMs;
  while (provedLive(recovery, program.holder) && Date.now() < deadline) await pause(POLL_MS);
  if (!signalProved(recovery, program, 'SIGKILL')) return 'SIGTERM';
  const bound = Date.now() + KILLED_WAIT_MS;
  while (provedLive(recovery, program.holder)) {
    // SIGKILL waits for a process in an uninterruptible sleep (a hung disk or network file system).
    if (Date.now() >= bound)
      throw new ContractError(
        'unavailable',
        `pid ${program.holder.pid}: still there ${KILLED_WAIT_MS} ms after SIGKILL`,
      );
    await pause(POLL_MS);
  }
  return 'SIGKILL';
}
