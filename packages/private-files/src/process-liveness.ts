import { hostname } from 'node:os';
import { isErrno } from './errno.js';
import { hostPlatform, type Platform, type ProcessStat } from './platform.js';

/** Who a file names: a process on a host, and on Linux which incarnation of it. */
export interface ProcessIdentity {
  readonly pid: number;
  readonly host: string;
  readonly processStart?: string;
}

/** What can be told about a named process from here. */
export type OwnerStatus = 'live' | 'absent' | 'ambiguous';

/** Any document that names a process, as a `ProcessIdentity` does. */
interface ProcessNamed {
  readonly pid: number;
  readonly host: string;
  readonly processStart?: string | undefined;
}

/** What one platform can tell of processes. The package's calls ask this host's (`hostPlatform`). */
export class ProcessLiveness {
  readonly #platform: Platform;
  #current: ProcessIdentity | undefined;

  constructor(platform: Platform) {
    this.#platform = platform;
  }

  /** As `currentProcess`, read once. */
  currentProcess(): ProcessIdentity {
    if (this.#current === undefined) {
      const stat = this.#platform.processStat('self');
      this.#current = this.#identityOf(process.pid, isStat(stat) ? stat : undefined);
    }
    return this.#current;
  }

  /** As `processIdentity`. */
  processIdentity(pid: number): ProcessIdentity | undefined {
    // kill(0) and negative pids signal process groups: they name no one process.
    if (!Number.isSafeInteger(pid) || pid < 1) return undefined;
    const stat = this.#platform.processStat(pid);
    if (stat === 'gone') return undefined;
    // Only to refuse naming a process that is not there: never a proof that a holder is gone.
    if (stat === undefined && signalProbe(pid) === 'absent') return undefined;
    return this.#identityOf(pid, stat);
  }

  /** As `ownerStatus`. */
  ownerStatus(pid: number, host: string, processStart?: string): OwnerStatus {
    if (host !== this.currentProcess().host) return 'ambiguous';
    if (processStart !== undefined) return this.#startStatus(pid, processStart);
    return this.#pidStatus(pid);
  }

  /** As `processDetails`. */
  processDetails(identity: ProcessNamed): ProcessDetails | undefined {
    const { pid, host, processStart } = identity;
    if (processStart === undefined || this.ownerStatus(pid, host, processStart) !== 'live') return undefined;
    const recorded = this.#fieldsOf(processStart)?.startTime;
    const stat = this.#platform.processStat(pid);
    const commandLine = this.#platform.commandLine(pid);
    // Read again after the command line: the same start time proves both reads were of that process.
    const again = this.#platform.processStat(pid);
    if (!isStat(stat) || !isStat(again) || commandLine === undefined) return undefined;
    if (stat.startTime !== recorded || again.startTime !== recorded) return undefined;
    if (!Number.isSafeInteger(stat.processGroup) || stat.processGroup < 1) return undefined;
    return { commandLine, processGroup: stat.processGroup };
  }

  /**
   * A process of this host, with `processStart`, `<platform>:<boot id>:<pid namespace>:<start time>`,
   * when its start is known.
   */
  #identityOf(pid: number, stat: ProcessStat | undefined): ProcessIdentity {
    const base = { pid, host: hostname() };
    if (stat === undefined) return base;
    // The namespace the pid is read in, which is this process's: a pid means something only there.
    const pidNamespace = this.#platform.pidNamespace();
    const bootId = this.#platform.bootId();
    if (pidNamespace === undefined || bootId === undefined) return base;
    return { ...base, processStart: `${this.#platform.name}:${bootId}:${pidNamespace}:${stat.startTime}` };
  }

  /** The fields of a `processStart` this platform writes, or undefined for any other. */
  #fieldsOf(processStart: string): { bootId: string; pidNamespace: string; startTime: string } | undefined {
    const tag = `${this.#platform.name}:`;
    if (!processStart.startsWith(tag)) return undefined;
    const fields = PROCESS_START.exec(processStart.slice(tag.length));
    if (fields === null) return undefined;
    const [, bootId = '', pidNamespace = '', startTime = ''] = fields;
    return { bootId, pidNamespace, startTime };
  }

  /**
   * A process by its pid alone: `kill(pid, 0)`, except that a zombie (exited, not yet reaped by
   * its parent), which `kill` still finds, is `absent`: it holds nothing. Where the platform cannot
   * read the process, `kill`'s ESRCH proves nothing gone: that is `ambiguous` (fail closed).
   */
  #pidStatus(pid: number): OwnerStatus {
    const probed = signalProbe(pid);
    if (probed === 'ambiguous') return probed;
    const stat = this.#platform.processStat(pid);
    if (stat === undefined) return probed === 'live' ? 'live' : 'ambiguous';
    return stat === 'gone' ? 'absent' : probed;
  }

  #startStatus(pid: number, processStart: string): OwnerStatus {
    const recorded = this.#fieldsOf(processStart);
    const mine = this.#fieldsOf(this.currentProcess().processStart ?? '');
    if (recorded === undefined || mine === undefined) return 'ambiguous';
    // Another boot: every process of that boot is gone with it.
    if (recorded.bootId !== mine.bootId) return 'absent';
    // Another PID namespace (a container sharing the state home): its PIDs mean nothing here.
    if (recorded.pidNamespace !== mine.pidNamespace) return 'ambiguous';
    const stat = this.#platform.processStat(pid);
    if (stat === undefined) return 'ambiguous';
    // A live PID with another start time was reused by an unrelated process.
    return stat !== 'gone' && stat.startTime === recorded.startTime ? 'live' : 'absent';
  }
}

const PROCESS_START = /^([0-9a-f-]{36}):([0-9]+):([0-9]+)$/;

function isStat(stat: ProcessStat | 'gone' | undefined): stat is ProcessStat {
  return stat !== undefined && stat !== 'gone';
}

function signalProbe(pid: number): OwnerStatus {
  try {
    process.kill(pid, 0);
    return 'live';
  } catch (error) {
    return isErrno(error, 'ESRCH') ? 'absent' : 'ambiguous';
  }
}

const onThisHost = new ProcessLiveness(hostPlatform);

/** This process: pid, host name and, on Linux, `linux:<boot id>:<pid namespace>:<start time>`. */
export function currentProcess(): ProcessIdentity {
  return onThisHost.currentProcess();
}

/**
 * Another process of this host, as `currentProcess` names this one (its start time read now), or
 * undefined when it is gone (exited, a zombie, or no such pid). Where its start cannot be read
 * (another platform), `kill(pid, 0)` tells whether it is there, and the identity has no `processStart`.
 * Never throws.
 */
export function processIdentity(pid: number): ProcessIdentity | undefined {
  return onThisHost.processIdentity(pid);
}

/**
 * Whether the process a file names is still running. Another host is
 * `ambiguous`; with `processStart`, another boot, a reused PID or a zombie is
 * `absent` and another PID namespace `ambiguous`; without it, `kill(pid, 0)`
 * decides, a zombie is `absent` too, and where the platform cannot read
 * processes (no start time) a pid `kill` does not find is `ambiguous`, never
 * `absent`. Never throws.
 */
export function ownerStatus(pid: number, host: string, processStart?: string): OwnerStatus {
  return onThisHost.ownerStatus(pid, host, processStart);
}

/**
 * A named process in words for a message, with what this host can tell of
 * it (by default `ownerStatus`): `pid 12 on host build-3 (absent)`.
 */
export function describeHolder(
  holder: ProcessNamed,
  status: OwnerStatus = ownerStatus(holder.pid, holder.host, holder.processStart),
): string {
  return `pid ${holder.pid} on host ${holder.host} (${status})`;
}

/** What this host shows of a live process beyond its identity. */
export interface ProcessDetails {
  /** Its arguments, program first, as it was started (`/proc/<pid>/cmdline`); empty when it shows none. */
  readonly commandLine: readonly string[];
  /** Its process group's id: a signal to `-processGroup` reaches every process of the group. */
  readonly processGroup: number;
}

/**
 * The command line and process group of the process `identity` names (a `ProcessIdentity`, or any
 * document that names a process), read now, only while it is that very process: live on this host
 * with the start time it was recorded with (`ownerStatus` `live`, by pid and start time).
 * Undefined when it is gone, when its pid names another process now (another start time: the pid
 * was reused), or when this host cannot tell: another host or PID namespace, no `processStart`,
 * or a platform other than Linux (where no start time is read either). Never throws.
 */
export function processDetails(identity: ProcessNamed): ProcessDetails | undefined {
  return onThisHost.processDetails(identity);
}
