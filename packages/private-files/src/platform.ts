import { readFileSync, readlinkSync } from 'node:fs';
import { ContractError } from '@leasehold/contracts';
import { isErrno } from './errno.js';

/** What the system shows of a running process: enough to tell it from a later process with its pid. */
export interface ProcessStat {
  /** When it started, in the platform's own units (digits): another value means another process. */
  readonly startTime: string;
  /** Its process group's id. */
  readonly processGroup: number;
}

/**
 * The facts about processes that liveness rests on, as one platform can read them. Every read
 * answers undefined when it cannot tell, and never throws: liveness then fails closed.
 *
 * One implementation per platform, selected once by `process.platform` (`hostPlatform`). A platform
 * that can read start times later (macOS: `sysctl` `kern.proc.pid` for the start, `kern.bootsessionuuid`
 * for the boot) is one more implementation here; nothing in process-liveness.ts changes.
 */
export interface Platform {
  /** `process.platform`; it also tags the `processStart` this platform writes. */
  readonly name: NodeJS.Platform;
  /** The process `pid` (or this one), `gone` when it exited (a zombie, not yet reaped, included). */
  processStat(pid: number | 'self'): ProcessStat | 'gone' | undefined;
  /** This boot's id, a lowercase UUID: no process outlives it. */
  bootId(): string | undefined;
  /** The PID namespace this process reads pids in (digits): a pid means something only there. */
  pidNamespace(): string | undefined;
  /** The arguments `pid` was started with, program first. */
  commandLine(pid: number): string[] | undefined;
}

/** Linux, from /proc. */
const linuxPlatform: Platform = {
  name: 'linux',
  processStat(pid) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch (error) {
      return isErrno(error, 'ENOENT', 'ESRCH') ? 'gone' : undefined;
    }
    // The fields from field 3 (the state) on: the command name (field 2) may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return 'gone'; // exited, not yet reaped: it holds nothing
    // Field 22, the start time in clock ticks since boot; field 5, the process group.
    const startTime = fields[19];
    return startTime === undefined ? undefined : { startTime, processGroup: Number(fields[2]) };
  },
  bootId() {
    return readOrUndefined(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
  },
  pidNamespace() {
    // "pid:[4026531836]": the inode names the namespace.
    return readOrUndefined(() => /\[([0-9]+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1]);
  },
  commandLine(pid) {
    // Every argument ends with a NUL: the last split is empty.
    return readOrUndefined(() => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1));
  },
};

function readOrUndefined<T>(read: () => T | undefined): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}

/** A platform where none of it can be read: every answer is "cannot tell". */
function otherPlatform(name: NodeJS.Platform): Platform {
  return {
    name,
    processStat: () => undefined,
    bootId: () => undefined,
    pidNamespace: () => undefined,
    commandLine: () => undefined,
  };
}

/** The implementation for the platform `name`. */
export function platformFor(name: NodeJS.Platform): Platform {
  return name === 'linux' ? linuxPlatform : otherPlatform(name);
}

/** This host's platform. */
export const hostPlatform = platformFor(process.platform);

/**
 * Refuses Windows, where what private files rest on does not hold.
 * @throws ContractError `refused` on Windows.
 */
export function assertSupportedPlatform(platform: Platform = hostPlatform): void {
  if (platform.name !== 'win32') return;
  throw new ContractError(
    'refused',
    'Windows is not supported: it has no POSIX file modes (no group or other bits to check), no O_NOFOLLOW, ' +
      'no fsync of a folder and no process start times, which private files rest on',
    { remedy: 'run it in WSL 2, with its files on a Linux file system inside it (not on a Windows drive under /mnt)' },
  );
}
