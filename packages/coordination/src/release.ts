import { ContractError, encode, sha256, type Registration, type Reservation } from '@leasehold/contracts';
import { fileOperation, type FileSnapshot, type PrivateFiles, type PublishOptions } from '@leasehold/private-files';
import { FILE_BYTES, SYNCED_BY_LATER_CHANGE, bounded, filesOf, type FileSnapshots } from './service-state.js';
import type { Workspace } from './workspace.js';

/**
 * What an owner's fences are as their releaser expects them. The release
 * updates it as each step takes effect, so a release that stopped part-way
 * goes on, when called again, from where it stopped.
 */
export interface HeldFences {
  /** Each service file as expected; `undefined` means "must be absent". */
  readonly snapshots: FileSnapshots;
  /** The registration, as its snapshot holds it; the release writes it `stopped`. */
  registration: Registration | undefined;
  /** The owner's row in the registry table; `undefined` once removed (or when there is none). */
  row: Reservation | undefined;
  /** The registry table's initialisation was interrupted (a dead owner's first acquire): the release's transaction completes it. */
  readonly initialisation?: boolean;
}

/** What only the releaser knows: whether it may still act, and what a failed write means to it. */
export interface Releaser {
  /**
   * Runs before every write of the release, after the previous one: throws to stop the release
   * where it is, with every remaining fence in place (the owner re-asserts its lease; a recovery
   * its grant, its journal record and that every holder is still gone).
   */
  check(): void;
  /**
   * A write whose rename or unlink took effect but whose fsync failed: the owner counts it as
   * done (every state a power loss may then leave is a fenced state of this order) and goes on;
   * a recovery stops, and the next one reads what is there.
   */
  readonly settles: boolean;
  /** Whether the checkout lock is the owner's to remove (a live plain tool's never is). */
  readonly removesCheckout: boolean;
}

type Removable = 'companion' | 'capability' | 'ownerLock' | 'mark' | 'checkoutLock';

/**
 * Releases an owner's fences in the one order that keeps every crash point
 * fenced (docs/ownership.md, "Release"): the companion, the registration
 * `stopped`, the capability, `owner.lock`, the folder's mark, then in one registry transaction
 * the row and, last, the checkout lock, so a plain tool never enters while a
 * service fence remains. A fence already gone (`undefined` in `held`) is
 * skipped. The owner's release and a recovery of a dead owner both run it.
 * @throws ContractError whatever `releaser.check` throws, `conflict` (a file changed under the
 * release), `busy`/`quarantine` from the registry lock, or the I/O error of a write that did not
 * take effect.
 */
export async function releaseInOrder(workspace: Workspace, held: HeldFences, releaser: Releaser): Promise<void> {
  // One operation of private-files: the folders from the state home down are walked once.
  return fileOperation(() => releaseSteps(workspace, held, releaser));
}

async function releaseSteps(workspace: Workspace, held: HeldFences, releaser: Releaser): Promise<void> {
  const { registry } = workspace;
  const writer = new FenceWriter(workspace, held.snapshots, releaser.settles);
  const check = () => releaser.check();
  // The companion first, with its own folder fsync, while the registration is still live (the one
  // state a companion is allowed in): at every crash point from here on the remaining fences still
  // name the owner, so a recovery finds them once it is gone.
  writer.remove('companion', undefined, check);
  // One fsync of the service folder for the changes below, by the last of them that runs
  // (SYNCED_BY_LATER_CHANGE): what is left decides which, since any of them may be gone already.
  const last =
    (['capability', 'ownerLock'] as const).filter((key) => held.snapshots[key] !== undefined).at(-1) ?? 'registration';
  const publish = (key: 'registration' | 'capability' | 'ownerLock') =>
    key === last ? undefined : SYNCED_BY_LATER_CHANGE;
  const registration = held.registration;
  if (registration !== undefined && registration.phase !== 'stopped') {
    const stopped: Registration = { ...registration, phase: 'stopped', version: registration.version + 1 };
    writer.replace('registration', encode(stopped), publish('registration'), check);
    held.registration = stopped;
  }
  writer.remove('capability', publish('capability'), check);
  writer.remove('ownerLock', publish('ownerLock'), check);
  // The folder's own mark after every service file and before the row (SPEC 5.1a): at every crash
  // point from here on the row still fences the root in this state home, and until here the mark
  // fenced it in every other.
  writer.remove('mark', undefined, check);
  const row = held.row;
  const checkout = releaser.removesCheckout && held.snapshots.checkoutLock !== undefined;
  if (row === undefined && !checkout && held.initialisation !== true) return;
  // The transaction's own first writes (taking over a dead holder's registry lock, completing an
  // interrupted initialisation of the table) are checked before like every other write.
  check();
  await registry.transaction(workspace.root, (transaction) => {
    if (row !== undefined) {
      check();
      // unreserve proves the lock its own and swaps the table by compare-and-swap.
      writer.write(
        () => transaction.unreserve(row.root, row.epoch),
        () => registry.rowOf(row.root).row === undefined,
      );
      held.row = undefined;
    }
    // The transaction's writer proves the registry lock, then removes the checkout lock.
    if (checkout) writer.remove('checkoutLock', undefined, check, transaction.writer);
  });
}

/**
 * Writes an owner's fences by compare-and-swap against the snapshots it holds, and holds what
 * each write leaves. With `settles`, a write that threw but took effect (its rename or unlink
 * happened, an fsync after it failed) counts as done.
 */
export class FenceWriter {
  readonly #workspace: Workspace;
  readonly #files: PrivateFiles;
  readonly #places: Workspace['places'];
  readonly #snapshots: FileSnapshots;
  readonly #settles: boolean;

  constructor(workspace: Workspace, snapshots: FileSnapshots, settles: boolean) {
    const { files, places } = workspace;
    this.#workspace = workspace;
    this.#files = files;
    this.#places = places;
    this.#snapshots = snapshots;
    this.#settles = settles;
  }

  /** Creates `key` exclusively and holds it. */
  create(key: 'companion', bytes: Uint8Array): void {
    const path = this.#places[key];
    bounded(bytes, FILE_BYTES[key], path);
    this.#publish(key, bytes, () => this.#files.create(path, bytes, FILE_BYTES[key]));
  }

  /** Replaces the held `key` with `bytes`, after `before()`, and holds what is there after. */
  replace(key: 'registration', bytes: Uint8Array, publish?: PublishOptions, before?: () => void): void {
    const path = this.#places[key];
    const expected = this.#snapshots[key];
    if (expected === undefined) throw new ContractError('conflict', `${path}: not held`);
    bounded(bytes, FILE_BYTES[key], path);
    before?.();
    this.#publish(key, bytes, () => this.#files.replace(path, expected, bytes, FILE_BYTES[key], publish));
  }

  /**
   * Removes `key`, after `before()`, when it is still held: by `files`, this writer's own unless
   * the removal belongs to a registry transaction (whose `writer` proves the lock first).
   */
  remove(
    key: Removable,
    publish?: PublishOptions,
    before?: () => void,
    files: Pick<PrivateFiles, 'remove'> = filesOf(this.#workspace, key),
  ): void {
    const expected = this.#snapshots[key];
    if (expected === undefined) return;
    const path = this.#places[key];
    before?.();
    this.write(
      () => files.remove(path, expected, FILE_BYTES[key], publish),
      () => filesOf(this.#workspace, key).read(path, FILE_BYTES[key]) === undefined,
    );
    this.#snapshots[key] = undefined;
  }

  /** Runs `write`; when it throws and this writer settles, `tookEffect` says whether it is done anyway. */
  write(write: () => void, tookEffect: () => boolean): void {
    try {
      write();
    } catch (error) {
      if (!this.#settles || !settled(tookEffect)) throw error;
    }
  }

  #publish(key: 'registration' | 'companion', bytes: Uint8Array, write: () => FileSnapshot): void {
    let written: FileSnapshot | undefined;
    this.write(
      () => {
        written = write();
      },
      () => {
        written = this.#files.read(this.#places[key], FILE_BYTES[key]);
        return written?.identity === sha256(bytes);
      },
    );
    this.#snapshots[key] = written;
  }
}

function settled(tookEffect: () => boolean): boolean {
  try {
    return tookEffect();
  } catch {
    // Unreadable: the original error is the one to report.
    return false;
  }
}
