import { ContractError } from '@leasehold/contracts';
import { ownerStatus, type OwnerStatus } from './process-liveness.js';
import { sameSnapshot, type FileSnapshot } from './file-reads.js';
import type { PrivateFiles } from './private-files.js';

/** What a held file (or a take-over marker) records: its holder's process, and a token unique to this hold. */
export interface HolderDocument {
  readonly token: string;
  readonly pid: number;
  readonly host: string;
  readonly processStart?: string | undefined;
}

/** A held file as read: its path and snapshot, the document it holds, and what this host can tell of that holder. */
export interface HeldFile<T extends HolderDocument> {
  readonly path: string;
  readonly snapshot: FileSnapshot;
  readonly holder: T;
  readonly verdict: OwnerStatus;
}

/** What is at a held file's place (or a take-over marker's), judged once. */
export type HolderJudgement<T extends HolderDocument> =
  | { readonly kind: 'free' }
  /** Being published, replaced or removed right now: look again. */
  | { readonly kind: 'changing' }
  /** Its holder is `live`, or cannot be told from here (`ambiguous`): never taken over. */
  | { readonly kind: 'held'; readonly found: HeldFile<T> }
  /** Left behind by a holder proved `absent`, and still unchanged: `takeOver` may replace it. */
  | { readonly kind: 'dead'; readonly found: HeldFile<T> };

export interface HolderFilesOptions<T extends HolderDocument> {
  /** The document in a file's bytes; throws to refuse the file, which is then never taken over. */
  decode(path: string, bytes: Uint8Array): T;
  /** The take-over marker of the file (or marker) whose holder's token is `token`, in a folder of the same root. */
  markerOf(token: string): string;
  /**
   * Who removes a take-over marker: `'taker'`, right after its rename (or its failed compare), for
   * a file a losing taker may never come to hold; `'holder'`, once it holds the file, for a file
   * every taker waits for (it sweeps the markers it finds: while a live holder holds the file,
   * every marker names a token no longer at the file's place).
   */
  readonly markerRemovedBy: 'taker' | 'holder';
  /** What this host can tell of a holder; by default `ownerStatus` of its process. */
  verdict?(holder: T): OwnerStatus;
  /** The error `judge` throws for a holder that cannot be told (`ambiguous`); without it, that file is `held`. */
  refuseAmbiguous?(found: HeldFile<T>): Error;
}

/**
 * Files each held by the process it names (a lock, a claim), under one `PrivateFiles` root: made
 * with an exclusive `create`, removed by their holder, and taken over only from a holder proved
 * `absent` (pid and start time), never because a file is old.
 */
export class HolderFiles<T extends HolderDocument> {
  readonly #files: PrivateFiles;
  readonly #options: HolderFilesOptions<T>;

  constructor(files: PrivateFiles, options: HolderFilesOptions<T>) {
    this.#files = files;
    this.#options = options;
  }

  /**
   * The file at `path` with its holder, or undefined when there is none.
   * @throws ContractError `conflict` (changing while read), `refused` (an unsafe file); and what `decode` throws.
   */
  read(path: string): HeldFile<T> | undefined {
    const snapshot = this.#files.read(path);
    if (snapshot === undefined) return undefined;
    const holder = this.#options.decode(path, snapshot.bytes);
    const verdict = this.#options.verdict?.(holder) ?? ownerStatus(holder.pid, holder.host, holder.processStart);
    return { path, snapshot, holder, verdict };
  }

  /**
   * What the file (or marker) at `path` is: free, changing, held, or left by a dead holder.
   * @throws ContractError `refused` (an unsafe file); what `decode` throws; what `refuseAmbiguous` answers.
   */
  judge(path: string): HolderJudgement<T> {
    let found: HeldFile<T> | undefined;
    try {
      found = this.read(path);
    } catch (error) {
      if (ContractError.is(error, 'conflict')) return { kind: 'changing' };
      throw error;
    }
    if (found === undefined) return { kind: 'free' };
    if (found.verdict === 'ambiguous' && this.#options.refuseAmbiguous !== undefined)
      throw this.#options.refuseAmbiguous(found);
    if (found.verdict !== 'absent') return { kind: 'held', found };
    // A holder that removed its file and exited between our read and the liveness check reads
    // `absent` too: only a file still there, unchanged, after its holder was seen gone was left behind.
    if (!this.unchanged(path, found.snapshot)) return { kind: 'changing' };
    return { kind: 'dead', found };
  }

  /**
   * Whether the file at `path` is still exactly `snapshot`; one changing while read is not.
   * @throws ContractError `refused` (an unsafe file).
   */
  unchanged(path: string, snapshot: FileSnapshot): boolean {
    try {
      return sameSnapshot(this.#files.read(path), snapshot);
    } catch (error) {
      if (ContractError.is(error, 'conflict')) return false;
      throw error;
    }
  }

  /**
   * Replaces the dead holder's file with `bytes`, exclusively, and answers its snapshot; undefined
   * when another taker won or the file moved. `replace` checks, then renames, so two takers that
   * judged the same dead file could both pass the check: only the one that first creates the
   * marker named after the dead token (an exclusive `link`) may replace it, and its marker goes
   * only after the rename, so a later marker of that token meets our file and fails its compare.
   * A marker whose own holder died is taken over the same way, by a marker named after its token.
   * @throws ContractError `refused` (an unsafe file or folder); as `judge`, for a marker in the way.
   */
  takeOver(dead: Extract<HolderJudgement<T>, { kind: 'dead' }>, bytes: Uint8Array): FileSnapshot | undefined {
    const marker = this.#options.markerOf(dead.found.holder.token);
    let ours: FileSnapshot | undefined;
    try {
      ours = this.#files.create(marker, bytes);
    } catch (error) {
      if (!ContractError.is(error, 'conflict')) throw error;
      const found = this.judge(marker);
      if (found.kind !== 'dead') return undefined;
      ours = this.takeOver(found, bytes);
      if (ours === undefined) return undefined;
    }
    try {
      return this.#files.replace(dead.found.path, dead.found.snapshot, bytes);
    } catch (error) {
      if (ContractError.is(error, 'conflict')) return undefined; // taken over before our marker was made
      throw error;
    } finally {
      if (this.#options.markerRemovedBy === 'taker') this.removeIfUnchanged(marker, ours);
    }
  }

  /**
   * Removes the file at `path` when it is still exactly `snapshot`; one changed or removed
   * meanwhile is left to whoever changed it.
   * @throws ContractError `refused` (an unsafe file).
   */
  removeIfUnchanged(path: string, snapshot: FileSnapshot): void {
    try {
      this.#files.remove(path, snapshot);
    } catch (error) {
      if (!ContractError.is(error, 'conflict')) throw error;
    }
  }
}
