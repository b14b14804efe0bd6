import { placeOptions, type ListedOwner } from '@leasehold/contracts';
import { diagnose } from '@leasehold/recovery';
import { openStateHome, type OpenBackend, type VerifyFileSystemOptions } from '@leasehold/state-home';
import { accessProblem } from '../access.js';
import { withBackend } from '../backend.js';
import { stateHomeOf, type CommandContext } from '../context.js';
import { fileSystemReport } from '../file-system-words.js';
import { findingRemedyLine } from '../finding-remedy.js';
import { verifyFsOption } from '../options.js';
import { table } from '../output.js';
import { verificationWords, verified } from '../verification.js';

/** Exit status of `doctor` when it found something. */
const FINDINGS_EXIT = 3;

/** One thing `doctor` reports, with its remedy in words: a finding of `diagnose`, an etcd fence or an access problem. */
interface Found {
  readonly path: string;
  readonly problem: string;
  readonly remedy: string;
  readonly kind: string;
  readonly workspace?: string;
}

/** The findings of `diagnose` in the state home's files, each remedy worded as its command line. */
function diagnosed(stateHome: string): Found[] {
  return diagnose(stateHome).map((finding) => ({ ...finding, remedy: findingRemedyLine(finding.remedy) }));
}

/** On etcd: every fence whose owner's lease ended, quarantined until an operator recovers it. */
async function etcdFindings({ backend, ownership, stateHome }: OpenBackend): Promise<Found[]> {
  if (backend.kind !== 'etcd') return [];
  const ended = (await ownership.list()).filter((entry: ListedOwner) => entry.verdict === 'lease-ended');
  return ended.map((entry) => ({
    path: `etcd:${backend.prefix}`,
    problem: `${entry.root} is fenced in etcd by host ${entry.host} (pid ${entry.pid}, epoch ${entry.epoch}), whose lease ended without a release: it stays quarantined`,
    remedy: `once that owner is known gone, review and recover it: leasehold recover ${placeOptions(entry.root, stateHome)}`,
    kind: 'etcd-lease-ended',
    workspace: entry.root,
  }));
}

/**
 * The findings, with what keeps this user out of the state home (a serve would need to create it,
 * so a state home that cannot be created is one too), unless a finding names that path already.
 */
function withAccess(stateHome: string, found: Found[]): Found[] {
  const problem = accessProblem(stateHome, true);
  if (problem === undefined || found.some((finding) => finding.path === problem.path)) return found;
  return [{ path: problem.path, problem: problem.problem, remedy: problem.remedy, kind: 'permission' }, ...found];
}

/**
 * `leasehold doctor`: the library's findings (`diagnose` of @leasehold/recovery)
 * in the state home's files and, on etcd, the fences whose lease ended, each
 * with its place, its workspace when known, the problem and the exact command
 * that fixes it; first, the file system the state home is on (or will be made on) and whether
 * Leasehold's guarantees are known to hold there. Changes nothing; only formats. With `--verify-fs`,
 * instead: the figures of `verifyFileSystem` in the state home.
 */
export async function doctor(context: CommandContext): Promise<number> {
  const { values } = context;
  const verify = verifyFsOption(values['verify-fs'], values.processes, values.seconds);
  const stateHome = stateHomeOf(context);
  if (verify !== undefined) return verifyFs(context, stateHome, verify);
  // Opened without the access check the other commands make: what keeps this user out is a finding here.
  const opening = openStateHome(stateHome, { env: context.env });
  const found: Found[] = await withBackend(
    context,
    async (opened) => withAccess(stateHome, [...diagnosed(stateHome), ...(await etcdFindings(opened))]),
    opening,
  );
  const fileSystem = fileSystemReport(stateHome);
  const { output } = context;
  output.record({
    fileSystem: fileSystem.record,
    findings: found.map((finding) => ({
      file: finding.path,
      problem: finding.problem,
      fix: finding.remedy,
      kind: finding.kind,
      workspace: finding.workspace ?? null,
    })),
  });
  output.say(...table([['file system', fileSystem.words]]));
  output.say(found.length === 0 ? `no problem found in ${stateHome}` : '');
  for (const finding of found) {
    const workspace = finding.workspace === undefined ? [] : [`  workspace: ${finding.workspace}`];
    output.say(finding.path, ...workspace, `  problem:   ${finding.problem}`, `  fix:       ${finding.remedy}`, '');
  }
  return found.length === 0 ? 0 : FINDINGS_EXIT;
}

/**
 * `doctor --verify-fs`: races processes on a counter in a scratch folder of the state home (made,
 * with the state home, when missing) and shows the figures; exit 3 when they failed.
 */
async function verifyFs(context: CommandContext, stateHome: string, options: VerifyFileSystemOptions): Promise<number> {
  const result = await verified(stateHome, options, context.command);
  context.output.record({ verifyFs: result });
  context.output.say(
    ...table([['verified', verificationWords(result)]]),
    ...result.errors.map((error) => `  error: ${error}`),
  );
  return result.passed ? 0 : FINDINGS_EXIT;
}
