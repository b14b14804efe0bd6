/** Quotes a word for a POSIX shell when it needs it, so that a suggested command line can be pasted as it is. */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`;
}
