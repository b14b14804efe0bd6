import type { BigIntStats, Stats } from 'node:fs';
import { ContractError, shellQuote } from '@leasehold/contracts';

/** What an entry was read as: the folders above a file, or the file itself. */
export type EntryType = 'folder' | 'file';

/**
 * A rule of a private root an entry breaks, with the facts a remedy needs:
 * `expected` is what the entry was read as (none: either will do), `uid` its
 * owner, `mode` its permission bits, `folder` whether it is one.
 */
export type UnsafeEntry =
  | {
      readonly rule: 'symbolic-link' | 'special-file' | 'wrong-type';
      readonly path: string;
      readonly expected?: EntryType;
    }
  | { readonly rule: 'foreign-owner'; readonly path: string; readonly uid: number; readonly folder: boolean }
  | { readonly rule: 'open-mode'; readonly path: string; readonly mode: number; readonly folder: boolean }
  | { readonly rule: 'second-link' | 'unexpected-entry'; readonly path: string }
  | { readonly rule: 'too-large'; readonly path: string; readonly maxBytes: number };

/**
 * The type rule, from the entry's lstat: a symbolic link is never followed,
 * a FIFO, socket or device never opened, and a file is not read as a folder
 * nor a folder as a file. Undefined when the entry keeps it.
 */
export function entryTypeBreach(
  path: string,
  stats: BigIntStats | Stats,
  expected?: EntryType,
): UnsafeEntry | undefined {
  const given = expected === undefined ? {} : { expected };
  if (stats.isSymbolicLink()) return { rule: 'symbolic-link', path, ...given };
  if (!stats.isDirectory() && !stats.isFile()) return { rule: 'special-file', path, ...given };
  if (expected !== undefined && stats.isDirectory() !== (expected === 'folder'))
    return { rule: 'wrong-type', path, expected };
  return undefined;
}

// process.geteuid() is a system call; every check of every level needs it.
// Read once: a process that later changes its effective uid is refused its
// new files, which fails closed. Without it (not POSIX) no file is this user's.
let effectiveUid: number | undefined;

/**
 * The ownership rules, from the entry's lstat: it is this user's, and no
 * group or other permission bit is set. Both when it breaks both.
 */
export function ownershipBreaches(path: string, stats: BigIntStats | Stats): UnsafeEntry[] {
  effectiveUid ??= process.geteuid?.();
  const folder = stats.isDirectory();
  const breaches: UnsafeEntry[] = [];
  const uid = Number(stats.uid);
  if (uid !== effectiveUid) breaches.push({ rule: 'foreign-owner', path, uid, folder });
  const mode = Number(stats.mode) & 0o777;
  if ((mode & 0o077) !== 0) breaches.push({ rule: 'open-mode', path, mode, folder });
  return breaches;
}

function problemOf(breach: UnsafeEntry): string {
  switch (breach.rule) {
    case 'symbolic-link':
      return breach.expected === 'folder' ? 'folder is a symbolic link' : 'is a symbolic link';
    case 'special-file':
    case 'wrong-type':
      if (breach.expected === undefined) return 'not a regular file or folder';
      return breach.expected === 'folder' ? 'not a folder' : 'not a regular file';
    case 'foreign-owner':
      return `${breach.folder ? 'folder' : 'file'} owned by another user`;
    case 'open-mode':
      return `${breach.folder ? 'folder' : 'file'} has group or other permission bits`;
    case 'second-link':
      return 'has more than one link';
    case 'unexpected-entry':
      return 'holds an unexpected entry';
    case 'too-large':
      return `larger than ${breach.maxBytes} bytes`;
  }
}

/** `chown` of `path` to this user: by root, who alone may give a file away. */
function chownLine(path: string): string {
  if (effectiveUid === undefined) return 'give it to the user running the program';
  const command = `\`chown ${effectiveUid} ${shellQuote(path)}\``;
  return effectiveUid === 0 ? command : `as root: ${command}`;
}

/** What a person does about a breach, naming the path (shell-quoted, so a command can be pasted). */
function remedyOf(breach: UnsafeEntry): string {
  const path = shellQuote(breach.path);
  switch (breach.rule) {
    case 'symbolic-link':
      return `a symbolic link is never followed: name the ${breach.expected === 'folder' ? 'folder' : 'file'} it points to instead, or remove the link: \`rm ${path}\``;
    case 'special-file':
    case 'wrong-type':
      return `move what stands there out of the way: \`mv ${path} ${shellQuote(`${breach.path}.aside`)}\``;
    case 'foreign-owner':
      return `it belongs to uid ${breach.uid}: run as that user, or, if it is yours to take, ${chownLine(breach.path)}`;
    case 'open-mode':
      return `take the group and other bits away: \`chmod ${breach.folder ? '700' : '600'} ${path}\``;
    case 'second-link':
      return 'remove the other name this file has (one a writer that died left in the staging folder goes with the next write), or restore the file by hand';
    case 'unexpected-entry':
      return `move out of it every name that the program using it did not write (\`ls -A ${path}\` lists them)`;
    case 'too-large':
      return 'it is not a file the program using it wrote: repair or restore it by hand';
  }
}

/**
 * `refused` for an entry that breaks a rule, carrying the rule as `breach` for a caller that reports
 * or repairs it, and the `remedy` a person runs.
 */
export class UnsafeEntryError extends ContractError {
  readonly breach: UnsafeEntry;

  constructor(breach: UnsafeEntry) {
    super('refused', `${breach.path}: ${problemOf(breach)}`, { path: breach.path, remedy: remedyOf(breach) });
    this.breach = breach;
  }

  /** The rule a `refused` error says was broken, when it says; undefined for any other error. */
  static breachOf(error: unknown): UnsafeEntry | undefined {
    if (!ContractError.is(error, 'refused')) return undefined;
    // Read as a field, not by `instanceof`, like ContractError.is: two installed copies may meet.
    const breach = (error as { breach?: unknown }).breach;
    return typeof breach === 'object' && breach !== null ? (breach as UnsafeEntry) : undefined;
  }
}
