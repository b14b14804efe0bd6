import { statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { ContractError } from '@leasehold/contracts';
import { recover as recoverWorkspace, recoverySnapshot, type RecoveryState } from '@leasehold/recovery';
import { placeOptions, stateHomeOf, workspaceOf, type CommandContext } from '../context.js';
import { table } from '../output.js';

/** One word for all holders: `live` or `ambiguous` if any is, else `absent`. */
export function overallStatus(state: RecoveryState): 'live' | 'ambiguous' | 'absent' {
  const statuses = state.holders.map(({ status }) => status);
  if (statuses.includes('live')) return 'live';
  if (statuses.includes('ambiguous')) return 'ambiguous';
  return 'absent';
}

function describe(context: CommandContext, state: RecoveryState, options: string): void {
  const ownerStatus = overallStatus(state);
  context.output.record({
    digest: state.digest,
    ownerStatus,
    fences: state.fences,
    holders: state.holders.map(({ holder, status, fences }) => ({ ...holder, status, fences })),
  });
  if (state.clear) {
    context.output.say(`nothing to recover: no fence remains for ${state.root}`);
    return;
  }
  context.output.say(
    `fences of ${state.root}:`,
    ...table(state.fences.map((fence) => [fence.kind, fence.path])).map((line) => `  ${line}`),
    '',
    'processes they name:',
    ...state.holders.map(({ holder, status }) => `  pid ${holder.pid} on ${holder.host}: ${status}`),
    '',
    `digest  ${state.digest}`,
    '',
    ownerStatus === 'absent'
      ? `Every holder is gone. To recover: leasehold recover ${options} --digest ${state.digest} --yes`
      : 'A holder is not gone: recovery would be refused. Stop it first, or diagnose with: leasehold doctor',
  );
}

async function confirmed(context: CommandContext): Promise<boolean> {
  if (context.values.yes === true) return true;
  const { stdin, stderr } = context.streams;
  if (stdin.isTTY !== true) {
    throw new ContractError('refused', 'recover: confirm with --yes (no terminal to ask on)');
  }
  const prompt = createInterface({ input: stdin, output: stderr as NodeJS.WritableStream });
  const answer = await new Promise<string>((resolve) => prompt.question('Release these fences? [y/N] ', resolve));
  prompt.close();
  return /^y(es)?$/i.test(answer.trim());
}

/**
 * `leasehold recover`: without `--digest`, shows the fences, their holders
 * and the digest, changing nothing. With `--digest D` and confirmation
 * (`--yes`, or a yes at the terminal), recovers that exact state.
 */
export async function recover(context: CommandContext): Promise<number> {
  const root = workspaceOf(context, true);
  const stateHome = stateHomeOf(context);
  const digest = context.values.digest;
  if (typeof digest !== 'string') {
    describe(context, recoverySnapshot(root, { stateHome }), placeOptions(root, stateHome));
    return 0;
  }
  if (!(await confirmed(context))) {
    context.output.say('nothing changed');
    return 1;
  }
  // Authority: the operator confirmed, and runs as the user who owns the state home.
  const assertAuthority = () => {
    if (statSync(stateHome).uid !== process.geteuid?.()) throw new ContractError('refused', `${stateHome}: owned by another user`);
  };
  const outcome = await recoverWorkspace(root, { stateHome, expectedDigest: digest, assertAuthority });
  context.output.record(outcome.recovered ? { recovered: true } : { recovered: false, reason: outcome.reason });
  context.output.say(
    outcome.recovered
      ? `recovered ${root}: it is stopped. Journal record: ${outcome.record}`
      : `nothing to recover for ${root}`,
  );
  return 0;
}
