import { ContractError, placeOptions, type Inspection, type WaitState } from '@leasehold/contracts';
import { processDetails } from '@leasehold/private-files';
import { WaitLine, changeOrTimeout } from './wait-line.js';
import type { Workspace } from './workspace.js';
import { inspectWorkspace } from './workspace-reads.js';

/** How often a waiter looks again when no notification woke it, in milliseconds. */
const LOOK_AGAIN_MS = 250;
/** How often `onWait` is told while a wait lasts. */
const TELL_EVERY_MS = 1000;

/** How a waiting acquire waits. */
export interface WaitOptions {
  readonly waitMs: number;
  readonly signal?: AbortSignal | undefined;
  readonly onWait?: ((wait: WaitState) => void) | undefined;
}

/** The owner a waiter waits for: one whose process is live, or one between two steps of its acquire or release. */
function waitableOwner(inspection: Inspection): { pid: number; host: string } | undefined {
  if (inspection.status === 'absent' || inspection.status === 'stopped') return undefined;
  const { owner } = inspection;
  if (owner === undefined) return undefined;
  if (inspection.status === 'unavailable' && inspection.inProgress === true) return owner;
  return owner.process === 'live' ? owner : undefined;
}

/**
 * `attempt` (an acquire of `workspace`), in turn behind every waiter that came first: this
 * process takes a ticket at the end of the line, and tries only once it is first; while a live
 * owner holds the workspace it waits (woken by a change of the workspace's folders or of the
 * line, or after 250 ms), until `waitMs` has passed or `signal` aborts. Every other refusal
 * (a quarantine, a conflict with no live owner behind it) answers at once. Its ticket is
 * removed however it ends.
 * @throws what `attempt` throws; `conflict` naming the owner once `waitMs` has passed; the
 * signal's reason once it aborts.
 */
export async function acquireInTurn<Lease>(
  workspace: Workspace,
  attempt: () => Promise<Lease>,
  { waitMs, signal, onWait }: WaitOptions,
): Promise<Lease> {
  signal?.throwIfAborted();
  const start = Date.now();
  const line = new WaitLine(workspace.root, workspace.places.stateHome);
  const mine = line.join();
  const seenSince = new Map<string, string>();
  let toldAt: number | undefined;
  let triedFree = false;
  try {
    for (;;) {
      signal?.throwIfAborted();
      const ahead = line.tickets().findIndex((ticket) => ticket.path === mine.path);
      if (ahead === -1) throw new ContractError('conflict', `${mine.path}: this waiter's ticket was removed`);
      let holder: { pid: number; host: string } | undefined;
      if (ahead === 0) {
        try {
          return await attempt();
        } catch (error) {
          if (!ContractError.is(error, 'conflict')) throw error;
          const now = inspectWorkspace(workspace);
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
      holder ??= ahead === 0 ? undefined : waitableOwner(inspectWorkspace(workspace));
      const waitedMs = Date.now() - start;
      if (waitedMs >= waitMs) throw waitedTooLong(workspace, holder, ahead, waitedMs);
      if (onWait !== undefined && (toldAt === undefined || Date.now() - toldAt >= TELL_EVERY_MS)) {
        toldAt = Date.now();
        onWait(waitState(workspace, holder, ahead, waitedMs, seenSince));
      }
      const { places } = workspace;
      await changeOrTimeout(
        [line.folder, places.registry, places.privateRoot, places.service],
        Math.min(LOOK_AGAIN_MS, waitMs - waitedMs),
        signal,
      );
    }
  } finally {
    line.leave(mine);
  }
}

/** What `onWait` is told: the holder (its command line where this host can read it), its place in line, the time waited. */
function waitState(
  workspace: Workspace,
  holder: { pid: number; host: string } | undefined,
  ahead: number,
  waitedMs: number,
  seenSince: Map<string, string>,
): WaitState {
  if (holder === undefined) return { ahead, waitedMs };
  const key = `${holder.pid}@${holder.host}`;
  const since = seenSince.get(key) ?? new Date().toISOString();
  seenSince.set(key, since);
  const row = workspace.registry.rowOf(workspace.root).row;
  const named = row !== undefined && row.pid === holder.pid && row.host === holder.host ? row : undefined;
  const commandLine = named === undefined ? null : (processDetails(named)?.commandLine ?? null);
  return { holder: { pid: holder.pid, host: holder.host, commandLine, since }, ahead, waitedMs };
}

function waitedTooLong(
  workspace: Workspace,
  holder: { pid: number; host: string } | undefined,
  ahead: number,
  waitedMs: number,
): ContractError {
  const what =
    holder === undefined
      ? `${ahead} waiter${ahead === 1 ? '' : 's'} still ahead`
      : `still held by pid ${holder.pid} on host ${holder.host}`;
  const options = placeOptions(workspace.root, workspace.places.stateHome);
  return new ContractError('conflict', `${workspace.root}: ${what} after waiting ${waitedMs} ms`, {
    remedy: `wait longer, ask its owner to hand it over (leasehold stop --ask ${options}), or stop it (leasehold stop ${options})`,
  });
}
