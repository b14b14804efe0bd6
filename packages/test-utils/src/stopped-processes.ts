import { readdir, readFile } from 'node:fs/promises';

/** How often `stopProcess` and `killUnreaped` look at the states again. */
const STOP_POLL_MS = 2;

/**
 * SIGSTOPs `pid` and resolves once every thread of it is stopped. `kill` only queues the signal:
 * the stop begins when the one thread the kernel woke for it next runs, and until then (milliseconds
 * on a loaded machine) the process's other threads still read their sockets and answer. A test that
 * sends a request to a process it believes frozen, before that, sees it served.
 */
export async function stopProcess(pid: number): Promise<void> {
  // kill(0) and kill(-1) signal a whole group, or every process this user may signal: as root, all of them.
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`stopProcess: ${pid} is not one process's id`);
  process.kill(pid, 'SIGSTOP');
  while (!(await everyThreadStopped(pid))) await new Promise((resolve) => setTimeout(resolve, STOP_POLL_MS));
}

/**
 * SIGKILLs a process `spawnUnreaped` started and resolves once it is a zombie (state Z in
 * `/proc/<pid>/stat`): exited, its pid still taken, since its parent never reaps it.
 */
export async function killUnreaped(pid: number): Promise<void> {
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`killUnreaped: ${pid} is not one process's id`);
  process.kill(pid, 'SIGKILL');
  while (stateOf(await readFile(`/proc/${pid}/stat`, 'utf8')) !== 'Z')
    await new Promise((resolve) => setTimeout(resolve, STOP_POLL_MS));
}

/**
 * Resolves once `pid` is gone: no such process, or a zombie (exited, not yet reaped by its parent,
 * which is what a killed process whose parent is gone may stay on a machine whose init reaps late).
 * Throws when it still runs after 30 s.
 */
export async function untilGone(pid: number): Promise<void> {
  for (let tries = 0; !(await gone(pid)); tries += 1) {
    if (tries > 30_000 / STOP_POLL_MS) throw new Error(`pid ${pid} still runs`);
    await new Promise((resolve) => setTimeout(resolve, STOP_POLL_MS));
  }
}

async function gone(pid: number): Promise<boolean> {
  try {
    return /^[ZX]$/.test(stateOf(await readFile(`/proc/${pid}/stat`, 'utf8')));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ESRCH')
      return true;
    throw error;
  }
}

/** Whether each thread of `pid` is in state T (stopped) or t (traced), or gone, from `/proc/<pid>/task/<tid>/stat`. */
async function everyThreadStopped(pid: number): Promise<boolean> {
  const threads = await readdir(`/proc/${pid}/task`);
  const states = await Promise.all(threads.map((thread) => stateOfThread(pid, thread)));
  return states.every((state) => state === 'T' || state === 't' || state === undefined);
}

/** A thread's state letter, or undefined if it exited since its folder was listed. */
async function stateOfThread(pid: number, thread: string): Promise<string | undefined> {
  try {
    return stateOf(await readFile(`/proc/${pid}/task/${thread}/stat`, 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** The state letter of a stat line: the field after the command name, which ends at the line's last `)`. */
function stateOf(stat: string): string {
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? '';
}
