import { ContractError } from './contract-error.js';
import type { Inspection, OwnerSummary, WaitState } from './ownership.js';
import { placeOptions } from './remedy-words.js';

// The one way a waiting acquire waits, whichever backend keeps its line: the backend gives a line
// (tickets in its own store) and the reads, this decides when to try, what to tell, when to give up.

/** How often a waiter looks again when nothing woke it, in milliseconds. */
const LOOK_AGAIN_MS = 250;
/** How often `onWait` is told while a wait lasts. */
const TELL_EVERY_MS = 1000;

/** How a waiting acquire waits (the `AcquireRequest` fields of a wait). */
export interface WaitOptions {
  readonly waitMs: number;
  readonly signal?: AbortSignal | undefined;
  readonly onWait?: ((wait: WaitState) => void) | undefined;
}

/** One waiter's place in a line, from when it joined until it leaves. */
export interface WaitTicket {
  /** How many waiters are ahead of this one (those proved gone not counted); -1 once this ticket is gone. */
  ahead(): Promise<number>;
  /** Resolves after `ms`, or sooner when the workspace or the line may have changed, or `signal` aborts. */
  changeOrTimeout(ms: number, signal?: AbortSignal): Promise<void>;
  /** Gives the place up: nothing of this ticket is left. */
  leave(): Promise<void>;
}

/** What a backend lends a waiting acquire for one workspace. */
export interface WaitingLine {
  readonly root: string;
  readonly stateHome: string;
  /** Takes a ticket at the end of the line. */
  join(): Promise<WaitTicket>;
  /** What `Ownership.inspect` answers now. Never throws. */
  inspect(): Promise<Inspection>;
  /** The arguments of the owner's process, program first, where this host can read them. */
  commandLine(owner: OwnerSummary): Promise<readonly string[] | null>;
}

/**
 * The owner a waiter waits for: one between two steps of its acquire or release, or one nothing
 * proved gone (a live process, or one this host cannot tell: another host's behind its live etcd
 * lease, another PID namespace's). A quarantine, or an owner proved gone, never clears by waiting.
 */
function waitableOwner(inspection: Inspection): OwnerSummary | undefined {
  if (inspection.status === 'absent' || inspection.status === 'stopped' || inspection.status === 'quarantined')
    return undefined;
  const { owner } = inspection;
  if (owner === undefined) return undefined;
  if (inspection.status === 'unavailable' && inspection.inProgress === true) return owner;
  return owner.process === 'absent' ? undefined : owner;
}

/**
 * `attempt` (an acquire of the line's workspace), in turn behind every waiter that came first:
 * this process takes a ticket at the end of the line, and tries only once it is first; while a
 * live owner holds the workspace it waits (woken by the line's notifications, or after 250 ms),
 * until `waitMs` has passed or `signal` aborts. Every other refusal (a quarantine, a conflict with
 * no live owner behind it) answers at once. Its ticket is given up however it ends.
 * @throws what `attempt` and `line.join` throw; `conflict` naming the owner once `waitMs` has
 * passed, or once the ticket was taken from it; the signal's reason once it aborts.
 */
export async function acquireInTurn<Lease>(
  line: WaitingLine,
  attempt: () => Promise<Lease>,
  { waitMs, signal, onWait }: WaitOptions,
): Promise<Lease> {
  signal?.throwIfAborted();
  const start = Date.now();
  const ticket = await line.join();
  const seenSince = new Map<string, string>();
  let toldAt: number | undefined;
  let triedFree = false;
  try {
    for (;;) {
      signal?.throwIfAborted();
      const ahead = await ticket.ahead();
      if (ahead === -1) throw new ContractError('conflict', `${line.root}: this waiter's ticket was taken from it`);
      let holder: OwnerSummary | undefined;
      if (ahead === 0) {
        try {
          return await attempt();
        } catch (error) {
          if (!ContractError.is(error, 'conflict')) throw error;
          const now = await line.inspect();
          if (now.status === 'stopped' || now.status === 'absent') {
            // The owner it met has just let go: try again at once, once. A conflict with the
            // workspace free (an overlapping root, an endpoint) is no owner to wait for.
            if (triedFree) throw error;
            triedFree = true;
            continue;
          }
          holder = waitableOwner(now);
          const passing = now.status === 'unavailable' && now.inProgress === true;
          if (holder === undefined && !passing) throw error;
        }
      }
      triedFree = false;
      // Behind other waiters, the owner they all wait for is named too.
      holder ??= ahead === 0 ? undefined : waitableOwner(await line.inspect());
      const waitedMs = Date.now() - start;
      if (waitedMs >= waitMs) throw waitedTooLong(line, holder, ahead, waitedMs);
      if (onWait !== undefined && (toldAt === undefined || Date.now() - toldAt >= TELL_EVERY_MS)) {
        toldAt = Date.now();
        onWait(await waitState(line, holder, ahead, waitedMs, seenSince));
      }
      await ticket.changeOrTimeout(Math.min(LOOK_AGAIN_MS, waitMs - waitedMs), signal);
    }
  } finally {
    await ticket.leave();
  }
}

/** What `onWait` is told: the holder (its command line where this host can read it), its place in line, the time waited. */
async function waitState(
  line: WaitingLine,
  holder: OwnerSummary | undefined,
  ahead: number,
  waitedMs: number,
  seenSince: Map<string, string>,
): Promise<WaitState> {
  if (holder === undefined) return { ahead, waitedMs };
  const key = `${holder.pid}@${holder.host}`;
  const since = seenSince.get(key) ?? new Date().toISOString();
  seenSince.set(key, since);
  const commandLine = await line.commandLine(holder);
  return { holder: { pid: holder.pid, host: holder.host, commandLine, since }, ahead, waitedMs };
}

function waitedTooLong(
  line: WaitingLine,
  holder: OwnerSummary | undefined,
  ahead: number,
  waitedMs: number,
): ContractError {
  const what =
    holder === undefined
      ? `${ahead} waiter${ahead === 1 ? '' : 's'} still ahead`
      : `still held by pid ${holder.pid} on host ${holder.host}`;
  const options = placeOptions(line.root, line.stateHome);
  return new ContractError('conflict', `${line.root}: ${what} after waiting ${waitedMs} ms`, {
    remedy: `wait longer, ask its owner to hand it over (leasehold stop --ask ${options}), or stop it (leasehold stop ${options})`,
  });
}
