import { withBackend } from '../backend.js';
import { rootExists, type CommandContext } from '../context.js';
import { configOf } from './status.js';

/**
 * `leasehold list`: every fenced workspace of the state home's backend with
 * what holds it: the owner's liveness as this host can tell (`live`, `absent`,
 * `ambiguous`) or, on etcd, `leased` (a live lease, on any host) and
 * `lease-ended` (quarantined until recovered).
 */
export async function list(context: CommandContext): Promise<number> {
  const entries = await withBackend(context, async ({ ownership }) =>
    Promise.all(
      (await ownership.list()).map(async ({ root, endpoint, epoch, pid, host, holder }) => ({
        root,
        endpoint,
        epoch,
        pid,
        host,
        ownerStatus: holder,
        rootExists: rootExists(root),
        // Another host's workspace on etcd keeps its config in that host's files: null here.
        configIdentity: (await configOf(ownership, root))?.identity ?? null,
      })),
    ),
  );
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
