import type { BigIntStats, Stats } from 'node:fs';
import { ContractError } from '@leasehold/contracts';

/** What an entry was read as: the folders above a file, or the file itself. */
export type EntryType = 'folder' | 'file';

/**
 * A rule of a private root an entry breaks, with the facts a remedy needs:
 * `expected` is what the entry was read as (none: either will do), `uid` its
 * owner, `mode` its permission bits, `folder` whether it is one.
 */
export type UnsafeEntry =
  | { readonly rule: 'symbolic-link' | 'special-file' | 'wrong-type'; readonly path: string; readonly expected?: EntryType }
  | { readonly rule: 'foreign-owner'; readonly path: string; readonly uid: number; readonly folder: boolean }
  | { readonly rule: 'open-mode'; readonly path: string; readonly mode: number; readonly folder: boolean }
  | { readonly rule: 'second-link' | 'unexpected-entry'; readonly path: string }
  | { readonly rule: 'too-large'; readonly path: string; readonly maxBytes: number };

/**
 * The type rule, from the entry's lstat: a symbolic link is never followed,
 * a FIFO, socket or device never opened, and a file is not read as a folder
 * nor a folder as a file. Undefined when the entry keeps it.
 */
export function entryTypeBreach(path: string, stats: BigIntStats | Stats, expected?: EntryType): UnsafeEntry | undefined {
  const given = expected === undefined ? {} : { expected };
  if (stats.isSymbolicLink()) return { rule: 'symbolic-link', path, ...given };
  if (!stats.isDirectory() && !stats.isFile()) return { rule: 'special-file', path, ...given };
  if (expected !== undefined && stats.isDirectory() !== (expected === 'folder')) return { rule: 'wrong-type', path, expected };
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

/** `refused` for an entry that breaks a rule, carrying the rule as `breach` for a caller that reports or repairs it. */
export class UnsafeEntryError extends ContractError {
  readonly breach: UnsafeEntry;

  constructor(breach: UnsafeEntry) {
    super('refused', `${breach.path}: ${problemOf(breach)}`, { path: breach.path });
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
