import type { ListedOwner, Verdict } from '@leasehold/contracts';
import { rootExists } from '@leasehold/recovery';
import { withBackend } from '../backend.js';
import type { CommandContext } from '../context.js';
import { programInWords, programRemedy } from '../outliving-program.js';
import { statusOf } from './status.js';

/** The process column for a person: what this host can tell of the owner's process (`gone`, never status's `absent`). */
const PROCESS_WORDS: Record<Verdict, string> = {
  live: 'live',
  absent: 'gone',
  ambiguous: 'ambiguous',
  leased: 'leased',
  'lease-ended': 'lease-ended',
};

/**
 * `leasehold list [--all]`: every fenced workspace (with `--all`, every workspace this host keeps
 * files for, stopped ones too, whose endpoint, pid, host and process are null) of the state home's backend, each with the word `status`
 * would answer for it (`running`, `unavailable` with its `reasonCode`, `quarantined`, `stopping`),
 * proved the same way, and what holds it: the owner's process as this host can tell (`live`,
 * `absent`, `ambiguous`) or, on etcd, `leased` (a live lease, on any host) and `lease-ended`.
 */
export async function list(context: CommandContext): Promise<number> {
  const all = context.values.all === true;
  const { entries, stateHome } = await withBackend(context, async ({ ownership, recovery, host, stateHome: home }) => {
    const fenced = await ownership.list();
    const entryOf = async (root: string, fence: ListedOwner | undefined) => {
      const report = await statusOf({ ownership, recovery }, root, host);
      return {
        root,
        status: report.status,
        ...(report.reasonCode === undefined ? {} : { reasonCode: report.reasonCode }),
        ...(report.program === undefined ? {} : { program: report.program }),
        endpoint: fence?.endpoint ?? null,
        epoch: fence?.epoch ?? report.epoch,
        pid: fence?.pid ?? null,
        host: fence?.host ?? null,
        ownerStatus: fence?.verdict ?? null,
        rootExists: rootExists(root),
        // Another host's workspace on etcd keeps its config in that host's files: null here.
        configIdentity: report.config?.identity ?? null,
      };
    };
    // With --all, every workspace this host keeps files for, stopped ones too, in root order.
    const fencedRoots = new Set(fenced.map((entry) => entry.root));
    const stopped = all ? (await ownership.workspaces()).filter((root) => !fencedRoots.has(root)) : [];
    const rows = await Promise.all([
      ...fenced.map((entry) => entryOf(entry.root, entry)),
      ...stopped.map((root) => entryOf(root, undefined)),
    ]);
    return { entries: all ? rows.sort((a, b) => a.root.localeCompare(b.root)) : rows, stateHome: home };
  });
  const { output } = context;
  output.record({ entries });
  if (entries.length === 0) output.say('no workspace is registered');
  const width = Math.max(4, ...entries.map((entry) => entry.root.length));
  const statusWidth = Math.max(6, ...entries.map((entry) => entry.status.length));
  if (entries.length > 0)
    output.say(`${'ROOT'.padEnd(width)}  ${'STATUS'.padEnd(statusWidth)}  ENDPOINT                  PID      PROCESS`);
  for (const entry of entries) {
    const flag = entry.rootExists ? '' : '  (folder no longer exists)';
    const reason = entry.reasonCode === undefined ? '' : `  (${entry.reasonCode})`;
    const process = entry.ownerStatus === null ? '-' : PROCESS_WORDS[entry.ownerStatus];
    output.say(
      `${entry.root.padEnd(width)}  ${entry.status.padEnd(statusWidth)}  ${(entry.endpoint ?? '-').padEnd(24)}  ${String(entry.pid ?? '-').padEnd(7)}  ${process}${reason}${flag}`,
    );
  }
  // A program that outlived its crashed owner is what blocks its workspace: named, with what ends it.
  for (const { root, program } of entries) {
    if (program === undefined) continue;
    output.say(
      '',
      `${root}: its owner is gone, but the program it fenced the workspace with lives on: ${programInWords(program)}`,
      `  ${programRemedy(program, root, stateHome)}`,
    );
  }
  return 0;
}
