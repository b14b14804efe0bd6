import type { WaitTicket, WaitingLine } from '@leasehold/contracts';
import { processDetails } from '@leasehold/private-files';
import { WaitLine, changeOrTimeout } from './wait-line.js';
import type { Workspace } from './workspace.js';
import { inspectWorkspace } from './workspace-reads.js';

/**
 * The waiting line of `workspace` in its state home's files: tickets in `<stateHome>/waiters/`,
 * woken by a change of the line's folder or of the workspace's folders.
 */
export function fileWaitingLine(workspace: Workspace): WaitingLine {
  const line = new WaitLine(workspace.root, workspace.places.stateHome);
  const { places } = workspace;
  const folders = [line.folder, places.registry, places.privateRoot, places.service];
  return {
    root: workspace.root,
    stateHome: places.stateHome,
    async join(): Promise<WaitTicket> {
      const mine = line.join();
      return {
        ahead: async () => line.tickets().findIndex((ticket) => ticket.path === mine.path),
        changeOrTimeout: (ms, signal) => changeOrTimeout(folders, ms, signal),
        leave: async () => line.leave(mine),
      };
    },
    inspect: async () => inspectWorkspace(workspace),
    // The registry row records the owner's start time, which proves the command line read is its own.
    async commandLine(owner) {
      const row = workspace.registry.rowOf(workspace.root).row;
      const named = row !== undefined && row.pid === owner.pid && row.host === owner.host ? row : undefined;
      return named === undefined ? null : (processDetails(named)?.commandLine ?? null);
    },
  };
}
