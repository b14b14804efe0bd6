import { statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { ContractError, type Recovery, type RecoveryView } from '@leasehold/contracts';
import { withBackend } from '../backend.js';
import { placeOptions, workspaceOf, type CommandContext } from '../context.js';
import { table } from '../output.js';

/** One word for all holders: `live` (a live process or lease) or `ambiguous` if any is, else `absent`. */
function overallStatus(state: RecoveryView): 'live' | 'ambiguous' | 'absent' {
  const statuses = state.holders.map(({ status }) => status);
  if (statuses.includes('live') || statuses.includes('leased')) return 'live';
  if (statuses.includes('ambiguous')) return 'ambiguous';
  return 'absent';
}

function describe(context: CommandContext, state: RecoveryView, options: string): void {
  const ownerStatus = overallStatus(state);
  context.output.record({
    digest: state.digest,
    ownerStatus,
    // `path`: the file, or `etcd:<key>` for a fence kept in etcd.
    fences: state.fences.map(({ where, ...fence }) => ({ ...fence, path: where })),
    holders: state.holders.map(({ holder, status, fences }) => ({ ...holder, status, fences })),
  });
  if (state.clear) {
    context.output.say(`nothing to recover: no fence remains for ${state.root}`);
    return;
  }
  context.output.say(
    `fences of ${state.root}:`,
    ...table(state.fences.map((fence) => [fence.kind, fence.where])).map((line) => `  ${line}`),
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

/** Exit status of `recover --digest D` that could not ask for a confirmation: a usage error. */
const UNCONFIRMED_EXIT = 2;

/** Confirmed (`--yes`, or a yes at the terminal), refused, or `undefined` when there is no terminal to ask on. */
async function confirmed(context: CommandContext): Promise<boolean | undefined> {
  if (context.values.yes === true) return true;
  const { stdin, stderr } = context.streams;
  if (stdin.isTTY !== true) return undefined;
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
  return withBackend(context, ({ recovery, stateHome }) => recoverOn(context, root, stateHome, recovery));
}

async function recoverOn(context: CommandContext, root: string, stateHome: string, recovery: Recovery): Promise<number> {
  const digest = context.values.digest;
  if (typeof digest !== 'string') {
    describe(context, await recovery.snapshot(root), placeOptions(root, stateHome));
    return 0;
  }
  const answer = await confirmed(context);
  if (answer === undefined) {
    context.output.record({ error: 'usage', message: 'recover --digest needs a confirmation: add --yes (no terminal to ask on)' });
    context.output.warn(`leasehold: recover --digest needs a confirmation: nothing changed. To recover: leasehold recover ${placeOptions(root, stateHome)} --digest ${digest} --yes`);
    return UNCONFIRMED_EXIT;
  }
  if (!answer) {
    context.output.say('nothing changed');
    return 1;
  }
  // Authority: the operator confirmed, and runs as the user who owns the state home. A state home
  // not created yet holds nothing to release, and this runs again before every effect.
  const assertAuthority = () => {
    const owner = statSync(stateHome, { throwIfNoEntry: false })?.uid;
    if (owner !== undefined && owner !== process.geteuid?.()) throw new ContractError('refused', `${stateHome}: owned by another user`, { path: stateHome });
  };
  const outcome = await recovery.recover(root, { expectedDigest: digest, assertAuthority });
  context.output.record(outcome.recovered ? { recovered: true } : { recovered: false, reason: outcome.reason });
  context.output.say(
    outcome.recovered
      ? `recovered ${root}: it is stopped. Journal record: ${outcome.record}`
      : `nothing to recover for ${root}`,
  );
  return 0;
}
