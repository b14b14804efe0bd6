// The words of a remedy (`ContractError`'s `remedy`) that more than one layer writes, written once:
// its command lines, pasteable into a POSIX shell as they are printed, and the remedy of a fence
// whose owner is not live, which the registry, coordination and their callers all meet.

/** Quotes a word for a POSIX shell when it needs it, so that a suggested command line can be pasted as it is. */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`;
}

/** The options that name workspace `root` of state home `stateHome` in a suggested `leasehold` command, shell-quoted. */
export function placeOptions(root: string, stateHome: string): string {
  return `--workspace ${shellQuote(root)} --state-home ${shellQuote(stateHome)}`;
}

/**
 * The remedy of a workspace `root` of `stateHome` fenced by an owner whose process is proved gone
 * (`absent`), or cannot be told live or gone from here (`ambiguous`: another host or PID namespace):
 * its fences stay until a recovery, which acts only where that process is proved gone.
 */
export function recoverRemedy(root: string, stateHome: string, process: 'absent' | 'ambiguous'): string {
  const place = placeOptions(root, stateHome);
  if (process === 'absent') {
    return `check it with \`leasehold status ${place}\`, then review and release what it left with \`leasehold recover ${place}\` (a start with recoverDead, --recover-dead, does that itself)`;
  }
  return `check it with \`leasehold status ${place}\`; once a person made sure that process is gone, release what it left with \`leasehold recover ${place}\` from its own host or PID namespace, the one place that proves it gone`;
}
