import type { Serving } from '@leasehold/transport';
import type { CommandContext } from '../context.js';
import { exitStatus, GatedProgram, type ProgramExit } from '../gated-program.js';
import { stopTimeoutOption } from '../options.js';
import { announceReady, serveWorkspace } from './serve.js';

/** The signals that stop `run` cleanly: its program first, then the workspace. */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * `leasehold run -- CMD [ARGS...]`: `serve`, with a program as the owner's work. Once serving, it
 * starts the program in its own process group, fences the workspace with the program's process
 * too, and only then lets it run. A stop (`leasehold stop`, SIGINT, SIGTERM, SIGHUP) ends the
 * program's group before the release (exit 0); a program that exits by itself is released after,
 * with its status; a lost lease ends the group and exits 4, touching no file.
 */
export async function run(context: CommandContext): Promise<number> {
  const supervisor = new Supervisor(context, context.program ?? [], stopTimeoutOption(context.values['stop-timeout']));
  const stopOnSignal = () => supervisor.abort.abort();
  for (const signal of STOP_SIGNALS) process.on(signal, stopOnSignal);
  try {
    const status = await serveWorkspace(context, {
      onServing: (serving, stateHome) => supervisor.start(serving, stateHome),
      options: { signals: [], signal: supervisor.abort.signal, beforeRelease: () => supervisor.stop() },
      onFailed: () => supervisor.stop(),
    });
    return status === 0 ? supervisor.statusAfterRelease() : status;
  } finally {
    for (const signal of STOP_SIGNALS) process.off(signal, stopOnSignal);
  }
}

/** `run`'s program across the owner's life cycle: started once serving, gone before the release. */
class Supervisor {
  /** Aborted to stop the owner: by a stop signal, the program's exit, or a start that failed. */
  readonly abort = new AbortController();
  readonly #context: CommandContext;
  readonly #argv: readonly string[];
  readonly #stopTimeoutMs: number;
  #program: GatedProgram | undefined;
  /** Settles once the program's fence is written and its gate opened, or once that failed. */
  #admitted: Promise<void> = Promise.resolve();
  /** Why the program could not be started: reported once the workspace is released. */
  #failure: { readonly error: unknown } | undefined;
  /** The program's exit when it ended by itself, before any stop. */
  #ownExit: ProgramExit | undefined;

  constructor(context: CommandContext, argv: readonly string[], stopTimeoutMs: number) {
    this.#context = context;
    this.#argv = argv;
    this.#stopTimeoutMs = stopTimeoutMs;
  }

  start(serving: Serving, stateHome: string): void {
    // A stop that came during acquire: there is nothing to start, only the release.
    if (this.abort.signal.aborted) return;
    try {
      this.#program = new GatedProgram(
        this.#argv,
        environmentOf(this.#context.env, serving, stateHome),
        this.#stopTimeoutMs,
      );
    } catch (error) {
      this.#fail(error);
      return;
    }
    const program = this.#program;
    void program.exited.then((exit) => this.#exited(program, exit));
    this.#admitted = this.#admit(program, serving, stateHome);
  }

  /** Ends the program's group (SIGTERM, then SIGKILL after the stop timeout) once its start has settled. */
  async stop(): Promise<void> {
    this.abort.abort();
    // Never while its fence is being written: the release that follows removes that fence first.
    await this.#admitted;
    await this.#program?.stop();
  }

  /** `run`'s exit after a clean release: the program's own status, 0 after a stop. @throws why it could not start. */
  statusAfterRelease(): number {
    if (this.#failure !== undefined) throw this.#failure.error;
    return this.#ownExit === undefined ? 0 : exitStatus(this.#ownExit);
  }

  async #admit(program: GatedProgram, serving: Serving, stateHome: string): Promise<void> {
    try {
      // Durable before the program may act: after a kill -9 of `run`, this fence still names a live program.
      await serving.lease.fenceProcess(program.pid);
    } catch (error) {
      this.#fail(error);
      return;
    }
    if (this.abort.signal.aborted) return;
    program.open();
    announceReady(this.#context.output, serving, stateHome, program.pid);
  }

  #exited(program: GatedProgram, exit: ProgramExit): void {
    if (!program.stopping) this.#ownExit = exit;
    const { output } = this.#context;
    output.record({ event: 'child-exited', childPid: program.pid, code: exit.code, signal: exit.signal });
    output.say(
      exit.signal === null
        ? `exited    pid ${program.pid}, code ${exit.code}`
        : `exited    pid ${program.pid}, killed by ${exit.signal}`,
    );
    this.abort.abort();
  }

  #fail(error: unknown): void {
    this.#failure = { error };
    this.abort.abort();
  }
}

/**
 * The program's environment: the caller's, and where its owner is. Never the capability: an
 * environment is inherited by every process the program starts and often logged; a client that
 * needs it reads it from its private file.
 */
function environmentOf(env: NodeJS.ProcessEnv, serving: Serving, stateHome: string): NodeJS.ProcessEnv {
  return {
    ...env,
    LEASEHOLD_WORKSPACE: serving.root,
    LEASEHOLD_STATE_HOME: stateHome,
    LEASEHOLD_EPOCH: serving.epoch,
    LEASEHOLD_ENDPOINT: serving.endpoint,
  };
}
