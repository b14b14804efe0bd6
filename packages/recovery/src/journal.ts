import { randomUUID } from 'node:crypto';
import { hostname, userInfo } from 'node:os';
import { join } from 'node:path';
import {
  JOURNAL_RECORD_NAME,
  decodeBytes,
  encode,
  journalRecord,
  recoveryRecordSchema,
  type AutomaticRecovery,
  type Fence,
  type RecoveryJournalEntry,
  type RecoveryRecord,
  type StateHomeLayout,
} from '@leasehold/contracts';
import { PrivateFiles, fileOperation, type FileSnapshot, type PrivateFilesHooks } from '@leasehold/private-files';
import type { FileRecoveryView } from './recovery-state.js';

/** Largest recovery record: 64 fences may each name a 4096-character path. */
export const RECOVERY_RECORD_BYTES = 524288;

/** One durable record in `<ns>/journal/`. */
export interface JournalRecord {
  readonly path: string;
  readonly snapshot: FileSnapshot;
}

/** Who runs the recovery: this process and its user. */
export function currentOperator(): RecoveryRecord['operator'] {
  let user: string;
  try {
    user = userInfo().username;
  } catch {
    user = `uid ${process.geteuid?.() ?? 'unknown'}`; // no passwd entry (containers)
  }
  return { pid: process.pid, host: hostname(), user: user === '' ? 'unknown' : user };
}

function fencesOf(state: FileRecoveryView): Fence[] {
  return state.fences.map(({ kind, path, holder }) => (holder === undefined ? { kind, path } : { kind, path, holder }));
}

/**
 * The recovery journal: one record per recovery, written durably before the
 * first effect, naming root, digest, operator and fences. It never holds a
 * secret: fences carry names and holders only.
 */
export class Journal {
  readonly folder: string;
  readonly #layout: StateHomeLayout;
  readonly #files: PrivateFiles;

  constructor(layout: StateHomeLayout, hooks?: PrivateFilesHooks) {
    this.folder = layout.journal;
    this.#layout = layout;
    this.#files = new PrivateFiles(layout.namespace, hooks === undefined ? {} : { hooks });
  }

  /**
   * Publishes the record of a recovery of `state`; `automatic` for one no person confirmed.
   * @throws ContractError `refused` (an unsafe journal folder, a record over its bound).
   */
  record(
    state: FileRecoveryView,
    operator: RecoveryRecord['operator'],
    automatic?: AutomaticRecovery,
    now = new Date(),
  ): JournalRecord {
    const record: RecoveryRecord = {
      schema: 'leasehold.recovery-record/1',
      root: state.root,
      digest: state.digest,
      recordedAt: now.toISOString(),
      operator,
      fences: fencesOf(state),
      ...(automatic === undefined ? {} : { automatic }),
    };
    this.#files.directory(this.folder, true);
    const path = journalRecord(this.#layout, now, randomUUID());
    return { path, snapshot: this.#files.create(path, encode(record), RECOVERY_RECORD_BYTES) };
  }

  /**
   * Every record, oldest first, decoded; of `root` only when given. Changes nothing.
   * @throws ContractError `refused` (an unsafe journal folder, a stray name, a file that is not a record).
   */
  entries(root?: string): RecoveryJournalEntry[] {
    return fileOperation(() => this.#entries(root));
  }

  #entries(root: string | undefined): RecoveryJournalEntry[] {
    return this.#files.entries(this.folder, [JOURNAL_RECORD_NAME]).flatMap((name) => {
      const path = join(this.folder, name);
      // Records are never removed; one that is gone meanwhile was never this journal's to show.
      const snapshot = this.#files.read(path, RECOVERY_RECORD_BYTES);
      if (snapshot === undefined) return [];
      const {
        root: recordRoot,
        digest,
        recordedAt,
        operator,
        fences,
        automatic,
      } = decodeBytes(recoveryRecordSchema, snapshot.bytes, RECOVERY_RECORD_BYTES, path);
      if (root !== undefined && recordRoot !== root) return [];
      const entry: RecoveryJournalEntry = {
        record: path,
        root: recordRoot,
        digest,
        recordedAt,
        operator,
        fences: fences.map(({ kind, path: fence }) => ({ kind, path: fence })),
        ...(automatic === undefined ? {} : { automatic }),
      };
      return [entry];
    });
  }

  /**
   * Proves the record is still there, unchanged: the durable bridge every effect crosses.
   * @throws ContractError `conflict` (removed or changed), `refused` (made unsafe).
   */
  assertDurable(record: JournalRecord): void {
    this.#files.assert(record.path, record.snapshot, RECOVERY_RECORD_BYTES);
  }
}
