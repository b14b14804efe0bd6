import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import type { Writable } from 'node:stream';
import { ContractError } from '@leasehold/contracts';
import { isErrno } from '@leasehold/private-files';

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
 * A program started in its own process group (its pgid is its pid, so one signal reaches every
 * process it starts) and held at a gate until `open`: it can act only once its fence is durable.
 */
export class GatedProgram {
  readonly pid: number;
  readonly exited: Promise<ProgramExit>;
  /** Whether `stop` was called: an exit after it is not the program's own. */
  stopping = false;
  readonly #child: ChildProcess;
  readonly #gate: Writable;

  /**
   * Spawns `argv` (program first) with `env`, stdin, stdout and stderr of this process.
   * @throws ContractError `refused` when no process could be started.
   */
  constructor(argv: readonly string[], env: NodeJS.ProcessEnv) {
    this.#child = spawn('/bin/sh', ['-c', GATE, 'sh', ...argv], { detached: true, env, stdio: ['inherit', 'inherit', 'inherit', 'pipe'] });
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
    this.exited = new Promise((resolve) => this.#child.once('exit', (code, signal) => resolve({ code, signal })));
  }

  /** Lets the program run: its fence must be durable first. */
  open(): void {
    this.#gate.end('go\n');
  }

  /**
   * SIGTERM to the program's group, SIGKILL to it after `timeoutMs`, and the program's exit. A
   * program still at the gate is shut out first, so it never runs.
   */
  async stop(timeoutMs: number): Promise<ProgramExit> {
    this.stopping = true;
    if (!this.#gate.writableEnded) this.#gate.end();
    const killLater = setTimeout(() => this.#signalGroup('SIGKILL'), timeoutMs);
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

/** A program's exit as a shell gives it: its code, or 128 + the number of the signal that killed it. */
export function exitStatus({ code, signal }: ProgramExit): number {
  return signal === null ? (code ?? 1) : 128 + constants.signals[signal];
}
