import { diagnose } from '@leasehold/recovery';
import { stateHomeOf, type CommandContext } from '../context.js';

/** Exit status of `doctor` when it found something. */
const FINDINGS_EXIT = 3;

/**
 * `leasehold doctor`: the library's findings (`diagnose` of @leasehold/recovery),
 * each with its file, its workspace when known, the problem and the exact
 * command that fixes it. Changes nothing; only formats.
 */
export async function doctor(context: CommandContext): Promise<number> {
  const stateHome = stateHomeOf(context);
  const found = diagnose(stateHome);
  const { output } = context;
  output.record({
    findings: found.map((finding) => ({
      file: finding.path,
      problem: finding.problem,
      fix: finding.remedy,
      kind: finding.kind,
      workspace: finding.workspace ?? null,
    })),
  });
  if (found.length === 0) output.say(`no problem found in ${stateHome}`);
  for (const finding of found) {
    const workspace = finding.workspace === undefined ? [] : [`  workspace: ${finding.workspace}`];
    output.say(finding.path, ...workspace, `  problem:   ${finding.problem}`, `  fix:       ${finding.remedy}`, '');
  }
  return found.length === 0 ? 0 : FINDINGS_EXIT;
}
