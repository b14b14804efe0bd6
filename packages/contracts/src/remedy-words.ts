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
 * The remedy of a workspace `root` of `stateHome` fenced by an owner's files: its fences stay until
 * a recovery, which acts only once every process they name is proved gone, from where that can be
 * proved. `process` is what this host tells of the one named: `absent` (proved gone), `ambiguous`
 * (another host or PID namespace), `live` (still running: it ends first).
 */
export function recoverRemedy(root: string, stateHome: string, process: 'live' | 'absent' | 'ambiguous'): string {
  const place = placeOptions(root, stateHome);
  const status = `check it with \`leasehold status ${place}\``;
  const recover = `\`leasehold recover ${place}\``;
  switch (process) {
    case 'absent':
      return `${status}, then review and release what it left with ${recover} (a start with recoverDead, --recover-dead, does that itself)`;
    case 'ambiguous':
      return `${status}; once a person made sure that process is gone, release what it left with ${recover} from its own host or PID namespace, the one place that proves it gone`;
    case 'live':
      return `${status}; once that process has ended, review and release what it left with ${recover}`;
  }
}

/** A `statfs` magic number as the kernel's headers write it: `0x858458f6`. */
export function magicInHex(magic: number): string {
  return `0x${magic.toString(16)}`;
}

/** A file system as a refusal names it: `nfs (statfs magic 0x6969)`. */
export function fileSystemInWords({ name, magic }: { readonly name: string; readonly magic: number }): string {
  return `${name} (statfs magic ${magicInHex(magic)})`;
}

/**
 * The remedy of a state home, or a workspace of it, on a file system whose guarantees are not
 * proven, `name` as the allowance names it: move it to a local disk, or earn the allowance there.
 * An allowance is earned in the state home, so a workspace's needs the state home on that file
 * system too.
 */
export function fileSystemRemedy(stateHome: string, name: string, what: 'state home' | 'workspace'): string {
  const home = `--state-home ${shellQuote(stateHome)}`;
  const where = what === 'state home' ? '' : ' and the state home on that file system too';
  return (
    `keep the ${what} on a local disk (ext4, xfs, btrfs, tmpfs, overlay, f2fs, zfs, bcachefs); ` +
    `or, if every host that reaches it sees a rename at once${where}, check that with \`leasehold doctor --verify-fs ${home}\` ` +
    `and allow it with \`leasehold init --allow-fs ${shellQuote(name)} ${home}\`, which runs that check first`
  );
}
