import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { boundEndpoint, type BenchPlace } from './fixtures.js';

// Section 7's system calls per reused cycle: `strace -f` over a process that
// runs the cycle, counted between two markers, against the bare replay of the
// same publications counted the same way. Needs `strace` on PATH (Debian:
// apt-get install strace) and a kernel that lets this user trace its own
// children; otherwise the section says why it was skipped.

const WORKER = fileURLToPath(new URL('./syscall-worker.js', import.meta.url));

/** What the syscall worker is told, as one JSON argument. */
export type SyscallWorkerArgument = {
  /** A path that does not exist: the worker `access()`es `<marker>-start` and `<marker>-end` around the counted cycles. */
  readonly marker: string;
  readonly warmupCycles: number;
  readonly cycles: number;
} & (
  | { readonly mode: 'leasehold'; readonly stateHome: string; readonly workspace: string; readonly endpoint: string }
  | { readonly mode: 'bare'; readonly folder: string; readonly shared: string; readonly sequence: string }
);

/** Reads the worker's argument back. */
export function parseSyscallWorkerArgument(argument: string | undefined): SyscallWorkerArgument {
  if (argument === undefined) throw new Error('syscall worker: expected one JSON argument');
  return JSON.parse(argument) as SyscallWorkerArgument;
}

/** The system calls of one cycle: in all, and by name (most first). */
export interface SyscallCount {
  readonly perCycle: number;
  readonly bySyscall: Readonly<Record<string, number>>;
}

/** Section 7's system call counts, or why they were not made. */
export type SyscallSection =
  | {
      readonly status: 'measured';
      readonly cycles: number;
      readonly warmupCycles: number;
      readonly leasehold: SyscallCount;
      /** The bare replay of the reused cycle's publications (section 6's bare floor). */
      readonly bare: SyscallCount;
      /** leasehold.perCycle / bare.perCycle. */
      readonly ratio: number;
    }
  | { readonly status: 'skipped'; readonly reason: string };

// Short, so that strace never cuts it (it prints 32 characters of a string by default).
const MARKER = '/leasehold-bench-mark';

/** Counts, by name, the calls started between the two markers of `trace` (`strace -f -o` output), per cycle. */
function countTrace(trace: string, cycles: number): SyscallCount {
  const lines = trace.split('\n');
  const start = lines.findIndex((line) => line.includes(`${MARKER}-start`));
  const end = lines.findIndex((line) => line.includes(`${MARKER}-end`));
  if (start < 0 || end < start) throw new Error('system call count: the markers are not in the trace');
  const counts = new Map<string, number>();
  for (const line of lines.slice(start + 1, end)) {
    // "<pid> name(args" starts a call; "<pid> <... name resumed>" ends one started earlier.
    const name = /^\d+ +([a-z0-9_]+)\(/.exec(line)?.[1];
    if (name !== undefined) counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  const total = [...counts.values()].reduce((sum, count) => sum + count, 0);
  const perCycle = (count: number): number => Math.round((10 * count) / cycles) / 10;
  return {
    perCycle: perCycle(total),
    bySyscall: Object.fromEntries(
      [...counts].sort((a, b) => b[1] - a[1]).map(([name, count]) => [name, perCycle(count)]),
    ),
  };
}

/** Runs the worker under `strace -f`, to its end; answers the trace's text. */
function traced(place: BenchPlace, argument: SyscallWorkerArgument): Promise<string> {
  const trace = join(place.folder('syscalls'), `${argument.mode}.trace`);
  const args = ['-f', '-qq', '-o', trace, '--', process.execPath, WORKER, JSON.stringify(argument)];
  return new Promise((resolve, reject) => {
    execFile('strace', args, { maxBuffer: 16 * 1024 * 1024 }, (error, _stdout, stderr) => {
      if (error === null) resolve(readFileSync(trace, 'utf8'));
      else reject(new Error(`strace failed: ${stderr.trim().split('\n')[0] ?? error.message}`));
    });
  });
}

/** Whether `strace` runs here. */
function straceMissing(): string | undefined {
  try {
    execFileSync('strace', ['-V'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'no `strace` on PATH (Debian and Ubuntu: apt-get install strace)';
  }
}

/**
 * Counts the system calls of a reused workspace's acquire + release and of
 * the bare replay of `sequence` (its publications), each in a process of its
 * own under strace, `cycles` of each after `warmupCycles`.
 */
export async function countSyscalls(
  place: BenchPlace,
  sequence: string,
  { cycles, warmupCycles }: { cycles: number; warmupCycles: number },
): Promise<SyscallSection> {
  const missing = straceMissing();
  if (missing !== undefined) return { status: 'skipped', reason: missing };
  const common = { marker: MARKER, cycles, warmupCycles };
  try {
    const leasehold = countTrace(
      await traced(place, {
        ...common,
        mode: 'leasehold',
        stateHome: join(place.root, 'state-syscalls'),
        workspace: place.workspace(),
        endpoint: boundEndpoint(),
      }),
      cycles,
    );
    const bare = countTrace(
      await traced(place, {
        ...common,
        mode: 'bare',
        folder: place.folder('syscalls', 'bare'),
        shared: place.folder('syscalls', 'bare-shared'),
        sequence,
      }),
      cycles,
    );
    return { status: 'measured', cycles, warmupCycles, leasehold, bare, ratio: leasehold.perCycle / bare.perCycle };
  } catch (error) {
    return { status: 'skipped', reason: error instanceof Error ? error.message : String(error) };
  }
}

/** The system calls' lines of section 7, or the plain reason they were skipped. */
export function formatSyscalls(section: SyscallSection): string[] {
  const title = 'system calls per reused acquire + release (strace -f, between two markers)';
  if (section.status === 'skipped') return [`  ${title}: skipped: ${section.reason}.`];
  const top = (count: SyscallCount): string =>
    Object.entries(count.bySyscall)
      .slice(0, 8)
      .map(([name, calls]) => `${name} ${calls}`)
      .join(', ');
  return [
    `  ${title}, ${section.cycles} cycles after ${section.warmupCycles} warm-up: ` +
      `${section.leasehold.perCycle} against ${section.bare.perCycle} for the bare replay of its publications ` +
      `(${section.ratio.toFixed(2)}x).`,
    `    Leasehold: ${top(section.leasehold)}.`,
    `    bare replay: ${top(section.bare)}.`,
  ];
}
