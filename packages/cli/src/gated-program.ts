import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import type { Writable } from 'node:stream';
import { ContractError } from '@leasehold/contracts';
import { isErrno } from '@leasehold/state-home';

/** How a program ended: its exit code, or the signal that killed it. */
export interface ProgramExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/**
 * The shell that holds the program at the gate: it waits for a line on fd 3 and only then execs the
 * program. `exec` keeps the pid and its start time, so a fence taken on the shell's pid names the
 * program itself; when the line never comes (the gate shut, or `run` died and the pipe closed with
 * it), `read` fails and the program never runs. fd 3 is closed for the program.
 */
const GATE = 'read _ <&3 && exec "$@" 3<&-';

/**
 * The watcher, which ends the program's group when `run` dies: a shell that waits for a line from
 * `run`, `done` once the program has ended and been reaped (after a stop, or by itself). Its stdin
 * reaching the end without that line means `run` died (kill -9, a crash): it sends SIGTERM to the
 * program's group, waits up to the stop timeout (whole seconds) while the program is still there,
 * then sends SIGKILL to its group, as `run`'s own stop does. It ignores the signals a terminal or a
 * supervisor sends to a group, and runs in a session of its own, so a `kill -9` of `run`'s whole
 * group spares it too. It fences nothing and holds none of the program's pipes.
 * Not guaranteed: the program's pid is proved by `kill -0` alone here (no start time in a shell),
 * so a program that exits as `run` dies, and whose pid is reused within the timeout, could be
 * mistaken for it; that needs the whole pid range to wrap around in seconds.
 */
const WATCHER = `trap '' INT TERM HUP QUIT
IFS= read -r said
[ "$said" = done ] && exit 0
kill -TERM -"$1" 2>/dev/null || exit 0
waited=0
while [ "$waited" -lt "$2" ] && kill -0 "$1" 2>/dev/null; do sleep 1; waited=$((waited + 1)); done
kill -0 "$1" 2>/dev/null && kill -KILL -"$1" 2>/dev/null
exit 0`;

/**
 * A program started in its own process group (its pgid is its pid, so one signal reaches every
 * process it starts) and held at a gate until `open`: it can act only once its fence is durable.
 * A watcher ends its group if `run` dies first.
 */
export class GatedProgram {
  readonly pid: number;
  readonly exited: Promise<ProgramExit>;
  /** Whether `stop` was called: an exit after it is not the program's own. */
  stopping = false;
  readonly #child: ChildProcess;
  readonly #gate: Writable;
  readonly #stopTimeoutMs: number;

  /**
   * Spawns `argv` (program first) with `env`, stdin, stdout and stderr of this process, and its
   * watcher; `stopTimeoutMs` is how long a stop waits after SIGTERM before SIGKILL.
   * @throws ContractError `refused` when no process could be started.
   */
  constructor(argv: readonly string[], env: NodeJS.ProcessEnv, stopTimeoutMs: number) {
    this.#stopTimeoutMs = stopTimeoutMs;
    this.#child = spawn('/bin/sh', ['-c', GATE, 'sh', ...argv], {
      detached: true,
      env,
      stdio: ['inherit', 'inherit', 'inherit', 'pipe'],
    });
    const gate = this.#child.stdio[3];
    if (this.#child.pid === undefined || gate === null || gate === undefined || !('write' in gate)) {
      // spawn reports the cause as an 'error' event too; the refusal below says it.
      this.#child.once('error', () => undefined);
      throw new ContractError('refused', `${argv[0] ?? ''}: could not start /bin/sh to run it`);
    }
    this.pid = this.#child.pid;
    this.#gate = gate;
    // The gate's reader goes away when the program exits: nothing of that is an error here.
    this.#gate.on('error', () => undefined);
    // Spawned after the program, so the program never inherits the watcher's pipe (nor the watcher the gate's).
    const watcher = startWatcher(this.pid, stopTimeoutMs);
    if (watcher === undefined) {
      // Shut out at the gate: the program never runs unwatched.
      this.#gate.end();
      throw new ContractError('refused', `${argv[0] ?? ''}: could not start /bin/sh to watch it`);
    }
    this.exited = new Promise((resolve) =>
      this.#child.once('exit', (code, signal) => {
        // Reaped: its group is no longer the watcher's to end (its pid may be given to another process).
        watcher.end('done\n');
        resolve({ code, signal });
      }),
    );
  }

  /** Lets the program run: its fence must be durable first. */
  open(): void {
    this.#gate.end('go\n');
  }

  /**
   * SIGTERM to the program's group, SIGKILL to it after the stop timeout, and the program's exit. A
   * program still at the gate is shut out first, so it never runs.
   */
  async stop(): Promise<ProgramExit> {
    this.stopping = true;
    if (!this.#gate.writableEnded) this.#gate.end();
    const killLater = setTimeout(() => this.#signalGroup('SIGKILL'), this.#stopTimeoutMs);
    this.#signalGroup('SIGTERM');
    try {
      return await this.exited;
    } finally {
      clearTimeout(killLater);
    }
  }

  #signalGroup(signal: NodeJS.Signals): void {
    // Once the program is reaped its pid may be given to another process, group and all: never signal it then.
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    try {
      process.kill(-this.pid, signal);
    } catch (error) {
      // The group is already gone; any other failure means it may still run.
      if (!isErrno(error, 'ESRCH')) throw error;
    }
  }
}

/** The watcher of the program `pid` (see WATCHER), its stdin open, or undefined when it could not be started. */
function startWatcher(pid: number, stopTimeoutMs: number): Writable | undefined {
  const seconds = String(Math.ceil(stopTimeoutMs / 1000));
  const watcher = spawn('/bin/sh', ['-c', WATCHER, 'leasehold-run-watcher', String(pid), seconds], {
    detached: true,
    cwd: '/',
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  // Its exit is no event of `run`'s: `run` may end before it does.
  watcher.unref();
  if (watcher.pid === undefined) {
    watcher.once('error', () => undefined);
    return undefined;
  }
  // A watcher killed by someone else: `done` then has no reader, and nothing is left to tell.
  watcher.stdin.on('error', () => undefined);
  return watcher.stdin;
}

/** A program's exit as a shell gives it: its code, or 128 + the number of the signal that killed it. */
export function exitStatus({ code, signal }: ProgramExit): number {
  return signal === null ? (code ?? 1) : 128 + constants.signals[signal];
}
