import { statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import {
  ContractError,
  encode,
  holdersNotProvedGone,
  placeOptions,
  sha256,
  shellQuote,
  type Ownership,
  type Recovery,
  type RecoveryView,
} from '@leasehold/contracts';
import { withBackend } from '../backend.js';
import { refuseUnknownFolder, workspaceOf, type CommandContext } from '../context.js';
import { coveringOf } from '../covering.js';
import { digestOption } from '../options.js';
import { table } from '../output.js';
import {
  commandInWords,
  outlivingProgramIn,
  programInWords,
  programRemedy,
  type OutlivingProgram,
} from '../outliving-program.js';
import { RemedyError } from '../remedies.js';

/** One word for all holders: `live` (a live process or lease) or `ambiguous` if any is, else `absent`. */
function overallStatus(state: RecoveryView): 'live' | 'ambiguous' | 'absent' {
  const statuses = state.holders.map(({ verdict }) => verdict);
  if (statuses.includes('live') || statuses.includes('leased')) return 'live';
  if (statuses.includes('ambiguous')) return 'ambiguous';
  return 'absent';
}

/**
 * Shows the review; answers its exit status: 0 when there is nothing to recover or every holder is
 * gone (the next step recovers), `REFUSED_EXIT` when the recovery would be refused as things are.
 */
function describe(context: CommandContext, recovery: Recovery, state: RecoveryView, stateHome: string): number {
  const ownerStatus = overallStatus(state);
  const program = outlivingProgramIn(recovery, state);
  context.output.record({
    digest: state.digest,
    ownerStatus,
    // `path`: the file, or `etcd:<key>` for a fence kept in etcd.
    fences: state.fences,
    holders: state.holders.map(({ holder, verdict, fences }) => ({ ...holder, status: verdict, fences })),
    ...(program === undefined ? {} : { program: program.record }),
  });
  if (state.clear) {
    context.output.say(`nothing to recover: no fence remains for ${state.root}`);
    return 0;
  }
  const programOf = (pid: number) =>
    pid === program?.holder.pid ? `, the program its gone owner ran: ${commandInWords(program.record)}` : '';
  context.output.say(
    `fences of ${state.root}:`,
    ...table(state.fences.map((fence) => [fence.kind, fence.path])).map((line) => `  ${line}`),
    '',
    'processes they name:',
    ...state.holders.map(
      ({ holder, verdict }) => `  pid ${holder.pid} on ${holder.host}: ${verdict}${programOf(holder.pid)}`,
    ),
    '',
    `digest  ${state.digest}`,
    '',
    nextStep(state, ownerStatus, program, stateHome),
  );
  return ownerStatus === 'absent' && program === undefined ? 0 : REFUSED_EXIT;
}

/** Exit status of a review whose recovery would be refused now (a holder live or untold, or its program lives on). */
const REFUSED_EXIT = 3;

/** What to do after a review: recover, end the program its gone owner left running, or find out about a holder. */
function nextStep(
  state: RecoveryView,
  ownerStatus: string,
  program: OutlivingProgram | undefined,
  stateHome: string,
): string {
  if (ownerStatus === 'absent')
    return `Every holder is gone. To recover: leasehold recover ${placeOptions(state.root, stateHome)} --digest ${state.digest} --yes`;
  if (program !== undefined)
    return `The program its gone owner ran lives on, so recovery would be refused; ${programRemedy(program.record, state.root, stateHome)}`;
  return 'A holder is not gone: recovery would be refused. Stop it first, or diagnose with: leasehold doctor';
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
 * (`--yes`, or a yes at the terminal), recovers that exact state. With
 * `--all-dead`, the same for every workspace whose holders are all proved gone.
 */
export async function recover(context: CommandContext): Promise<number> {
  const allDead = context.values['all-dead'] === true;
  digestOption(context.values.digest, allDead ? '`leasehold recover --all-dead`' : '`leasehold recover`');
  if (allDead) {
    return withBackend(context, ({ ownership, recovery, stateHome }) =>
      recoverAllDead(context, stateHome, ownership, recovery),
    );
  }
  const folder = workspaceOf(context, true);
  return withBackend(context, async ({ ownership, recovery, stateHome }) => {
    // Run inside a fenced workspace, it is about that workspace (as `status` names it).
    const inspection = await ownership.inspect(folder);
    refuseUnknownFolder(folder, inspection);
    const { root } = await coveringOf(ownership, folder, inspection);
    return recoverOn(context, root, stateHome, recovery);
  });
}

/**
 * Asks for the confirmation `--digest D` needs; answers the exit status when there is none to go on.
 * `command` is the whole line to run again with `--yes`.
 */
async function refusedConfirmation(context: CommandContext, command: string): Promise<number | undefined> {
  const answer = await confirmed(context);
  if (answer === undefined) {
    context.output.record({
      error: 'usage',
      message: 'recover --digest needs a confirmation: add --yes (no terminal to ask on)',
      remedy: `run: ${command}`,
    });
    context.output.warn(`leasehold: recover --digest needs a confirmation: nothing changed. To recover: ${command}`);
    return UNCONFIRMED_EXIT;
  }
  if (!answer) {
    context.output.say('nothing changed');
    return 1;
  }
  return undefined;
}

/**
 * Authority: the operator confirmed, and runs as the user who owns the state home. A state home
 * not created yet holds nothing to release, and this runs again before every effect.
 */
function authorityOver(stateHome: string): () => void {
  return () => {
    const owner = statSync(stateHome, { throwIfNoEntry: false })?.uid;
    if (owner !== undefined && owner !== process.geteuid?.())
      throw new ContractError('refused', `${stateHome}: owned by another user`, { path: stateHome });
  };
}

async function recoverOn(
  context: CommandContext,
  root: string,
  stateHome: string,
  recovery: Recovery,
): Promise<number> {
  const digest = context.values.digest;
  if (typeof digest !== 'string') return describe(context, recovery, await recovery.view(root), stateHome);
  const review = `leasehold recover ${placeOptions(root, stateHome)}`;
  // Looked at first, for the words only: the recovery itself compares the digest again, atomically.
  const now = await recovery.view(root);
  if (now.clear) return nothingToRecover(context, root);
  if (now.digest !== digest) {
    throw new RemedyError(
      'conflict',
      `${root}: --digest ${digest} does not match the state shown now (it changed since, or the digest was mistyped); nothing changed`,
      `see the current state and its digest: ${review}`,
    );
  }
  const program = outlivingProgramIn(recovery, now);
  if (program !== undefined) {
    throw new RemedyError(
      'quarantine',
      `${root}: the program its gone owner fenced it with lives on: ${programInWords(program.record)}; nothing changed`,
      programRemedy(program.record, root, stateHome),
    );
  }
  const refused = await refusedConfirmation(context, `${review} --digest ${digest} --yes`);
  if (refused !== undefined) return refused;
  const outcome = await recovery.recover(root, { expectedDigest: digest, assertAuthority: authorityOver(stateHome) });
  if (!outcome.recovered) return nothingToRecover(context, root);
  context.output.record({ recovered: true });
  context.output.say(`recovered ${root}: it is stopped. Journal record: ${outcome.record}`);
  return 0;
}

/** A recovery with nothing left to do (done already, by this or another command): said so, exit 0. */
function nothingToRecover(context: CommandContext, root: string): number {
  context.output.record({ recovered: false, reason: 'clear' });
  context.output.say(`nothing to recover for ${root}: no fence of a gone owner is left`);
  return 0;
}

/** Every fenced workspace of the state home whose holders this host has all proved gone, by root. */
async function deadWorkspaces(ownership: Ownership, recovery: Recovery): Promise<RecoveryView[]> {
  const roots = [...new Set((await ownership.list()).map(({ root }) => root))].sort();
  const views = await Promise.all(roots.map((root) => recovery.view(root)));
  return views.filter((view) => !view.clear && holdersNotProvedGone(view).length === 0);
}

/** One digest over the dead workspaces: each root with the digest of its own view. */
function digestOfAll(views: readonly RecoveryView[]): string {
  return sha256(
    encode({ schema: 'leasehold.all-dead-digest/1', workspaces: views.map(({ root, digest }) => ({ root, digest })) }),
  );
}

/**
 * `leasehold recover --all-dead` (after a reboot, say): lists every workspace whose holders are all
 * proved gone with one digest over them; with that digest and confirmation, recovers exactly those,
 * each through its own digest-checked recovery and journal record.
 */
async function recoverAllDead(
  context: CommandContext,
  stateHome: string,
  ownership: Ownership,
  recovery: Recovery,
): Promise<number> {
  const views = await deadWorkspaces(ownership, recovery);
  const all = digestOfAll(views);
  const again = `leasehold recover --all-dead --state-home ${shellQuote(stateHome)}`;
  const digest = context.values.digest;
  if (typeof digest !== 'string') {
    context.output.record({
      digest: all,
      workspaces: views.map(({ root, digest: own, holders }) => ({
        root,
        digest: own,
        holders: holders.map(({ holder }) => holder),
      })),
    });
    if (views.length === 0) {
      context.output.say(`nothing to recover: no workspace of ${stateHome} is held only by processes proved gone`);
      return 0;
    }
    context.output.say(
      'workspaces whose owners are all proved gone on this host:',
      ...views.map(
        ({ root, holders }) => `  ${root}  (${holders.map(({ holder }) => `pid ${holder.pid}`).join(', ')})`,
      ),
      '',
      `digest  ${all}`,
      '',
      `To recover them all: ${again} --digest ${all} --yes`,
    );
    return 0;
  }
  if (views.length === 0) {
    context.output.record({ recovered: false, reason: 'clear' });
    context.output.say(`nothing to recover: no workspace of ${stateHome} is held only by processes proved gone`);
    return 0;
  }
  if (digest !== all) {
    throw new RemedyError(
      'conflict',
      `${stateHome}: --digest ${digest} does not match the workspaces proved dead now (one came or went since, or the digest was mistyped); nothing changed`,
      `see them and their digest: ${again}`,
    );
  }
  const refused = await refusedConfirmation(context, `${again} --digest ${digest} --yes`);
  if (refused !== undefined) return refused;
  for (const view of views) {
    const outcome = await recovery.recover(view.root, {
      expectedDigest: view.digest,
      assertAuthority: authorityOver(stateHome),
    });
    context.output.record({
      root: view.root,
      recovered: outcome.recovered,
      ...(outcome.recovered ? { record: outcome.record } : { reason: outcome.reason }),
    });
    context.output.say(
      outcome.recovered
        ? `recovered ${view.root}: it is stopped. Journal record: ${outcome.record}`
        : `nothing to recover for ${view.root}`,
    );
  }
  return 0;
}
