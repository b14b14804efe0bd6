import type { FindingRemedy } from './finding-remedy.js';

/**
 * Every kind of finding `diagnose` reports (a file system not allowed first and alone, then unsafe
 * files first and alone; see the README for each).
 */
export const FINDING_KINDS = [
  'unproven-file-system',
  'symbolic-link',
  'special-file',
  'foreign-owner',
  'open-mode',
  'stray-entry',
  'staging-leftover',
  'unreadable',
  'changing',
  'ambiguous-registry-lock',
  'ambiguous-takeover-marker',
  'deleted-root',
  'dead-owner',
  'outliving-program',
  'ambiguous-owner',
  'dead-checkout-lock',
] as const;

export type FindingKind = (typeof FINDING_KINDS)[number];

/** One problem: what it is, the file or folder it is about, whose workspace, what is wrong and what kind of remedy clears it. */
export interface Finding {
  readonly kind: FindingKind;
  /** The absolute path of the file or folder. */
  readonly path: string;
  /** The workspace root the path belongs to, when it is known. */
  readonly workspace?: string;
  readonly problem: string;
  /** What clears it, with the proviso a person must check first when there is one. */
  readonly remedy: FindingRemedy;
}
