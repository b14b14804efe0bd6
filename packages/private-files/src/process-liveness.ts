import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import { isErrno } from './errno.js';

/** Who a file names: a process on a host, and on Linux which incarnation of it. */
export interface ProcessIdentity {
  readonly pid: number;
  readonly host: string;
  readonly processStart?: string;
}

/** What can be told about a named process from here. */
export type OwnerStatus = 'live' | 'absent' | 'ambiguous';

interface LinuxStart {
  readonly bootId: string;
  readonly pidNamespace: string;
  readonly startTime: string;
}

const PROCESS_START = /^linux:([0-9a-f-]{36}):([0-9]+):([0-9]+)$/;

function readBootId(): string {
  return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
}

function readPidNamespace(): string {
  // "pid:[4026531836]": the inode names the namespace.
  return /\[([0-9]+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? '';
}

/**
 * The fields of /proc/<pid>/stat from field 3 (the state) on, or undefined for a gone or zombie
 * process: [2] is field 5, the process group; [19] is field 22, the start time in clock ticks since boot.
 */
function readStat(pid: number | 'self'): string[] | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (error) {
    if (isErrno(error, 'ENOENT', 'ESRCH')) return undefined;
    throw error;
  }
  // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (fields[0] === 'Z' || fields[0] === 'X') return undefined; // exited, not yet reaped: it holds nothing
  return fields;
}

/** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), or undefined for a gone or zombie process. */
function readStartTime(pid: number | 'self'): string | undefined {
  return readStat(pid)?.[19];
}

/** Where /proc shows `pid` (or this process), on Linux: its start, `gone` (exited, or a zombie), or undefined when it cannot be told. */
function linuxStart(pid: number | 'self'): LinuxStart | 'gone' | undefined {
  if (process.platform !== 'linux') return undefined;
  try {
    const startTime = readStartTime(pid);
    if (startTime === undefined) return 'gone';
    // The namespace the pid is read in, which is this process's: a pid means something only there.
    const pidNamespace = readPidNamespace();
    if (pidNamespace === '') return undefined;
    return { bootId: readBootId(), pidNamespace, startTime };
  } catch {
    return undefined;
  }
}

/** A process of this host, with `processStart` when its start is known. */
function identityOf(pid: number, start: LinuxStart | undefined): ProcessIdentity {
  const base = { pid, host: hostname() };
  return start === undefined
    ? base
    : { ...base, processStart: `linux:${start.bootId}:${start.pidNamespace}:${start.startTime}` };
}

let current: ProcessIdentity | undefined;

/** This process: pid, host name and, on Linux, `linux:<boot id>:<pid namespace>:<start time>`. */
export function currentProcess(): ProcessIdentity {
  if (current === undefined) {
    const start = linuxStart('self');
    current = identityOf(process.pid, start === 'gone' ? undefined : start);
  }
  return current;
}

/**
 * Another process of this host, as `currentProcess` names this one (its start time read now), or
 * undefined when it is gone (exited, a zombie, or no such pid). Where its start cannot be read
 * (another platform), `kill(pid, 0)` tells whether it is there, and the identity has no `processStart`.
 * Never throws.
 */
export function processIdentity(pid: number): ProcessIdentity | undefined {
  // kill(0) and negative pids signal process groups: they name no one process.
  if (!Number.isSafeInteger(pid) || pid < 1) return undefined;
  const start = linuxStart(pid);
  if (start === 'gone') return undefined;
  if (start === undefined && signalProbe(pid) === 'absent') return undefined;
  return identityOf(pid, start);
}

/**
 * A process by its pid alone: `kill(pid, 0)`, except that on Linux a zombie (exited, not yet
 * reaped by its parent), which `kill` still finds, is `absent`: it holds nothing.
 */
function pidStatus(pid: number): OwnerStatus {
  const probed = signalProbe(pid);
  if (probed !== 'live' || process.platform !== 'linux') return probed;
  return linuxStart(pid) === 'gone' ? 'absent' : 'live';
}

function signalProbe(pid: number): OwnerStatus {
  try {
    process.kill(pid, 0);
    return 'live';
  } catch (error) {
    return isErrno(error, 'ESRCH') ? 'absent' : 'ambiguous';
  }
}

function startStatus(pid: number, processStart: string): OwnerStatus {
  const recorded = PROCESS_START.exec(processStart);
  const mine = PROCESS_START.exec(currentProcess().processStart ?? '');
  if (recorded === null || mine === null) return 'ambiguous';
  // Another boot: every process of that boot is gone with it.
  if (recorded[1] !== mine[1]) return 'absent';
  // Another PID namespace (a container sharing the state home): its PIDs mean nothing here.
  if (recorded[2] !== mine[2]) return 'ambiguous';
  let startTime: string | undefined;
  try {
    startTime = readStartTime(pid);
  } catch {
    return 'ambiguous';
  }
  // A live PID with another start time was reused by an unrelated process.
  return startTime === recorded[3] ? 'live' : 'absent';
}

/**
 * Whether the process a file names is still running. Another host is
 * `ambiguous`; with `processStart`, another boot, a reused PID or a zombie is
 * `absent` and another PID namespace `ambiguous`; without it, `kill(pid, 0)`
 * decides, and on Linux a zombie is `absent` too. Never throws.
 */
export function ownerStatus(pid: number, host: string, processStart?: string): OwnerStatus {
  if (host !== currentProcess().host) return 'ambiguous';
  if (processStart !== undefined) return startStatus(pid, processStart);
  return pidStatus(pid);
}

/**
 * A named process in words for a message, with what this host can tell of
 * it (by default `ownerStatus`): `pid 12 on host build-3 (absent)`.
 */
export function describeHolder(
  holder: { readonly pid: number; readonly host: string; readonly processStart?: string | undefined },
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
export function processDetails(identity: {
  readonly pid: number;
  readonly host: string;
  readonly processStart?: string | undefined;
}): ProcessDetails | undefined {
  const { pid, host, processStart } = identity;
  if (processStart === undefined || ownerStatus(pid, host, processStart) !== 'live') return undefined;
  const recorded = PROCESS_START.exec(processStart)?.[3];
  try {
    const stat = readStat(pid);
    const commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    // Read again after the command line: the same start time proves both reads were of that process.
    if (stat === undefined || stat[19] !== recorded || readStartTime(pid) !== recorded) return undefined;
    const processGroup = Number(stat[2]);
    if (!Number.isSafeInteger(processGroup) || processGroup < 1) return undefined;
    // Every argument ends with a NUL: the last split is empty.
    return { commandLine: commandLine.slice(0, -1), processGroup };
  } catch {
    return undefined;
  }
}
