// The words of a command line inside a remedy (`ContractError`'s `remedy`), written once for every
// layer that words one, so that each is pasteable into a POSIX shell as it is printed.

/** Quotes a word for a POSIX shell when it needs it, so that a suggested command line can be pasted as it is. */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`;
}

/** The options that name workspace `root` of state home `stateHome` in a suggested `leasehold` command, shell-quoted. */
export function placeOptions(root: string, stateHome: string): string {
  return `--workspace ${shellQuote(root)} --state-home ${shellQuote(stateHome)}`;
}
