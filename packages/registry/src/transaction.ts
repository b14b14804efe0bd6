import { ContractError, REGISTRY_BYTES, type Reservation, type StateHomeLayout } from '@leasehold/contracts';
import type { FileSnapshot, PrivateFiles } from '@leasehold/private-files';
import { GuardedWriter } from './guarded-writer.js';
import { admitReservation, checkedRow, decodeRoots, encodeTable, rememberRoots } from './registry-view.js';

/** What an operation inside `transaction` may do. */
export interface RegistryTransaction {
  /** The workspace root the transaction is for (named in the lock). */
  readonly root: string;
  /** The validated reservations as the transaction last read or wrote them. */
  readonly entries: readonly Reservation[];
  /** This transaction's view of `root`'s row. */
  rowOf(root: string): Reservation | undefined;
  /**
   * Refuses what `reserve` would refuse, writing nothing: an overlapping root or the same endpoint
   * (`conflict`), then a full table (`capacity`, over REGISTRY_ENTRIES or REGISTRY_BYTES).
   */
  admit(reservation: Reservation): void;
  /**
   * Compare-and-swap of `roots.json` with `reservation` added.
   * @throws ContractError as `admit`, before anything is written; `conflict` if the lock or the table moved.
   */
  reserve(reservation: Reservation): void;
  /**
   * Compare-and-swap of `roots.json` with exactly the row of `root` and `epoch` removed.
   * @throws ContractError `conflict` when no such row is there, or the lock or the table moved.
   */
  unreserve(root: string, epoch: string): void;
  /**
   * The transaction's one other write, the per-workspace publication that must not race the
   * table: each of its calls first proves the lock is still this transaction's and `roots.json` is
   * as it last saw it (`conflict` otherwise, with nothing written).
   */
  readonly writer: GuardedWriter;
}

/**
 * One transaction's view of the table, under the registry lock: every write is
 * a compare-and-swap of `roots.json` against the table this transaction last
 * read or wrote, after proving the lock is still its own; its one other write
 * goes through `writer`, which makes the same proof first.
 */
export class Transaction implements RegistryTransaction {
  readonly root: string;
  entries: readonly Reservation[];
  readonly writer: GuardedWriter;
  readonly #layout: StateHomeLayout;
  readonly #files: PrivateFiles;
  readonly #lock: FileSnapshot;
  // The table as last read or written; undefined after a failed write, whose
  // outcome (old or new table, both whole) is read again before the next one.
  #roots: FileSnapshot | undefined;

  constructor(
    layout: StateHomeLayout,
    files: PrivateFiles,
    root: string,
    lock: FileSnapshot,
    start: { entries: readonly Reservation[]; roots: FileSnapshot },
  ) {
    this.#layout = layout;
    this.#files = files;
    this.root = root;
    this.#lock = lock;
    this.entries = start.entries;
    this.#roots = start.roots;
    this.writer = new GuardedWriter(files, () => this.#assertHeld());
  }

  rowOf(root: string): Reservation | undefined {
    return this.entries.find((entry) => entry.root === root);
  }

  admit(reservation: Reservation): void {
    this.#admitted(reservation);
  }

  reserve(reservation: Reservation): void {
    this.#refresh();
    const { entries, bytes } = this.#admitted(reservation);
    this.#write(entries, bytes);
  }

  unreserve(root: string, epoch: string): void {
    this.#refresh();
    const remaining = this.entries.filter((entry) => !(entry.root === root && entry.epoch === epoch));
    if (remaining.length !== this.entries.length - 1) {
      throw new ContractError('conflict', `${this.#layout.roots}: no row for ${root} of epoch ${epoch}`);
    }
    this.#write(remaining);
  }

  /** Proves the lock is still this transaction's and `roots.json` is as it last saw it: `conflict` otherwise. */
  #assertHeld(): void {
    // After a failed write (the old or the new table, both whole) the table is read again under the
    // lock: a caller that found its write took effect anyway (only the fsync failed) goes on.
    this.#refresh();
    this.#files.assert(this.#layout.registryLock, this.#lock);
    this.#files.assert(this.#layout.roots, this.#roots, REGISTRY_BYTES);
  }

  /**
   * The table with `reservation` added, refused as `admit` says. Only the new row is checked: the
   * others were proved valid together when the table was decoded or written.
   */
  #admitted(reservation: Reservation): { entries: readonly Reservation[]; bytes: Uint8Array } {
    const row = checkedRow(reservation, this.#layout.stateHome, this.#layout.roots);
    admitReservation(this.entries, row, this.#layout.roots);
    const entries = [...this.entries, row];
    return { entries, bytes: encodeTable(entries, this.#layout.roots) };
  }

  /** After a failed write, reads the table again under the lock (only a lock holder writes it). */
  #refresh(): void {
    if (this.#roots !== undefined) return;
    this.#files.assert(this.#layout.registryLock, this.#lock);
    const roots = this.#files.read(this.#layout.roots, REGISTRY_BYTES);
    if (roots === undefined) throw new ContractError('conflict', `${this.#layout.roots}: vanished under the lock`);
    this.entries = decodeRoots(roots, this.#layout.stateHome, this.#layout.roots);
    this.#roots = roots;
  }

  #write(entries: readonly Reservation[], bytes = encodeTable(entries, this.#layout.roots)): void {
    this.#refresh();
    // The lock first; the table is compared by the replace itself, right before its rename.
    this.#files.assert(this.#layout.registryLock, this.#lock);
    const expected = this.#roots!;
    this.#roots = undefined;
    this.#roots = this.#files.replace(this.#layout.roots, expected, bytes, REGISTRY_BYTES);
    this.entries = rememberRoots(this.#roots, entries, this.#layout.roots);
  }
}
