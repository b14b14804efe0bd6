import { existsSync, readFileSync } from 'node:fs';

/** A process as a fixture records itself, one JSON line in a log: what tells it from a later process with its pid. */
export interface LoggedProcess {
  readonly pid: number;
  readonly host: string;
  readonly processStart?: string;
}

/** The non-empty lines of a log that children append to; none while no child has written. */
export function logLines(path: string): string[] {
  return existsSync(path)
    ? readFileSync(path, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
    : [];
}

/** The processes recorded in the log at `path`, in the order they wrote. */
export function loggedProcesses(path: string): LoggedProcess[] {
  return logLines(path).map((line) => JSON.parse(line) as LoggedProcess);
}

/**
 * Kills (SIGKILL) processes a test had started detached, which are no children of this process
 * (`cleanUp` cannot reap them), each only while `isLive` says it is still the recorded process,
 * since its pid may name another by now; then waits until none is, for 5 s at most. `isLive` is
 * the caller's (private-files' `ownerStatus`): test-utils may not depend on private-files.
 */
export async function killDetached(
  processes: readonly LoggedProcess[],
  isLive: (process: LoggedProcess) => boolean,
): Promise<void> {
  for (const each of processes.filter(isLive)) process.kill(each.pid, 'SIGKILL');
  for (let round = 0; processes.some(isLive) && round < 500; round += 1)
    await new Promise((resolve) => setTimeout(resolve, 10));
}
