import type { AutomaticRecovery, RecoveryJournalEntry } from '@leasehold/contracts';
import { withBackend } from '../backend.js';
import { workspaceOf, type CommandContext } from '../context.js';

/** What an automatic recovery proved gone, for a person: each holder and how (`journal`, and `serve --recover-dead` as it recovers). */
export function provedGoneInWords(automatic: AutomaticRecovery): string {
  return automatic.proved.map(({ holder, by }) => `pid ${holder.pid} on host ${holder.host} (by ${by})`).join(', ');
}

/** Who ran a recovery, for a person: the user and process, or what was proved gone for an automatic one. */
function byWhom(entry: RecoveryJournalEntry): string {
  const { user, pid, host } = entry.operator;
  const operator = `${user} (pid ${pid} on host ${host})`;
  if (entry.automatic === undefined) return `by ${operator}, who confirmed the digest`;
  return `automatically by ${operator}: proved gone ${provedGoneInWords(entry.automatic)}`;
}

/**
 * `leasehold journal`: every recovery journalled in the state home (of `--workspace` only, when
 * given), oldest first: when, which workspace, the digest, who ran it or what was proved gone, and
 * where the record is. Records hold no secret. Changes nothing.
 */
export async function journal(context: CommandContext): Promise<number> {
  const root = context.values.workspace === undefined ? undefined : workspaceOf(context, true);
  const entries = await withBackend(context, ({ recovery }) => recovery.journal(root));
  const { output } = context;
  output.record({ entries });
  if (entries.length === 0)
    output.say(root === undefined ? 'no recovery is journalled' : `no recovery of ${root} is journalled`);
  for (const entry of entries) {
    output.say(
      `${entry.recordedAt}  ${entry.root}`,
      `  digest  ${entry.digest}`,
      // etcd's part of a wider recovery: the digest the operator confirmed is the whole one's.
      ...(entry.reviewedDigest === undefined ? [] : [`  reviewed digest  ${entry.reviewedDigest} (the one confirmed)`]),
      `  ${byWhom(entry)}`,
      `  record  ${entry.record}`,
      '',
    );
  }
  return 0;
}
