import { ownerStatus, retryingReads } from '@leasehold/private-files';
import { Registry } from '@leasehold/registry';
import { rootExists, stateHomeOf, type CommandContext } from '../context.js';

/** The registry's entries, read again when a writer raced the read. */
function registryEntries(registry: Registry) {
  return retryingReads(() => registry.list().entries);
}

/** `leasehold list`: every reservation in the state home with its owner's liveness. */
export async function list(context: CommandContext): Promise<number> {
  const entries = registryEntries(new Registry(stateHomeOf(context))).map((entry) => ({
    root: entry.root,
    endpoint: entry.endpoint,
    epoch: entry.epoch,
    pid: entry.pid,
    host: entry.host,
    ownerStatus: ownerStatus(entry.pid, entry.host, entry.processStart),
    rootExists: rootExists(entry.root),
  }));
  const { output } = context;
  output.record({ entries });
  if (entries.length === 0) output.say('no workspace is registered');
  const width = Math.max(4, ...entries.map((entry) => entry.root.length));
  if (entries.length > 0) output.say(`${'ROOT'.padEnd(width)}  ENDPOINT                  PID      OWNER`);
  for (const entry of entries) {
    const flag = entry.rootExists ? '' : '  (folder no longer exists)';
    output.say(`${entry.root.padEnd(width)}  ${entry.endpoint.padEnd(24)}  ${String(entry.pid).padEnd(7)}  ${entry.ownerStatus}${flag}`);
  }
  return 0;
}
