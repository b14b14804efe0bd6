import { ContractError, encode } from '@leasehold/contracts';
import { FILE_BYTES, SYNCED_BY_LATER_CHANGE, assertFiles, snapshotsOf, type FileSnapshots, type WorkspacePlaces } from '@leasehold/coordination';
import { ownerStatus, retryingReads, type PrivateFiles, type PublishOptions } from '@leasehold/private-files';
import type { Registry, RegistryTransaction } from '@leasehold/registry';
import { internalsFor, rowIdentity, type RecoveryInternals, type RecoveryState } from './recovery-state.js';

/**
 * Releases a dead owner's fences as `state` saw them, in release order: the
 * companion, the registration `stopped`, the capability, `owner.lock`, then in one registry
 * transaction (which takes over a dead holder's lock like any other, and
 * completes an interrupted initialisation) the row and the owner's checkout
 * lock. Before every effect it calls `guard()` (authority, durability) and
 * re-asserts that every holder is absent and every file, the row included,
 * is as it expects. A failure stops it where it is, with the remaining
 * fences in place.
 */
export async function releaseDeadOwner(
  files: PrivateFiles,
  registry: Registry,
  places: WorkspacePlaces,
  state: RecoveryState,
  guard: () => void,
): Promise<void> {
  const internals = internalsFor(state, places);
  if (state.clear) return;
  await new DeadOwnerRelease(files, registry, places, state, internals, guard).run();
}

class DeadOwnerRelease {
  readonly #files: PrivateFiles;
  readonly #registry: Registry;
  readonly #places: WorkspacePlaces;
  readonly #state: RecoveryState;
  readonly #internals: RecoveryInternals;
  readonly #guard: () => void;
  readonly #expected: FileSnapshots;
  #row: string | null;

  constructor(
    files: PrivateFiles,
    registry: Registry,
    places: WorkspacePlaces,
    state: RecoveryState,
    internals: RecoveryInternals,
    guard: () => void,
  ) {
    this.#files = files;
    this.#registry = registry;
    this.#places = places;
    this.#state = state;
    this.#internals = internals;
    this.#guard = guard;
    this.#expected = snapshotsOf(internals.service);
    this.#row = rowIdentity(internals.row);
  }

  async run(): Promise<void> {
    const { service, row, initialisation, ownersCheckout } = this.#internals;
    const registration = service.registration;
    // The companion first, with its own folder fsync, as a release removes it: while the registration
    // is still live (the one state a companion is allowed in), so that at every crash point the
    // remaining fences still name the dead owner for the next recovery.
    this.#removeIfPresent('companion');
    // One fsync of the service folder for the changes below, by the last of them that runs (as a release
    // does; see SYNCED_BY_LATER_CHANGE). What the dead owner left decides which run: any of them may be absent.
    const last = (['capability', 'ownerLock'] as const).filter((key) => this.#expected[key] !== undefined).at(-1) ?? 'registration';
    const publish = (key: 'registration' | 'capability' | 'ownerLock'): PublishOptions | undefined => (key === last ? undefined : SYNCED_BY_LATER_CHANGE);
    if (registration !== undefined && registration.value.phase !== 'stopped') {
      const stopped = encode({ ...registration.value, phase: 'stopped' });
      this.#effect(() => {
        this.#expected.registration = this.#files.replace(
          this.#places.registration,
          registration.snapshot,
          stopped,
          FILE_BYTES.registration,
          publish('registration'),
        );
      });
    }
    this.#removeIfPresent('capability', undefined, publish('capability'));
    this.#removeIfPresent('ownerLock', undefined, publish('ownerLock'));
    const checkout = ownersCheckout && this.#expected.checkoutLock !== undefined;
    if (row === undefined && !checkout && initialisation === undefined) return;
    // The transaction's own first write may be the completion of an interrupted initialisation.
    this.#effect(() => {});
    await this.#registry.transaction(this.#places.root, (transaction) => {
      if (row !== undefined) {
        this.#effect(() => {
          transaction.assertHeld();
          transaction.unreserve(row.root, row.epoch);
          this.#row = null;
        });
      }
      if (checkout) this.#removeIfPresent('checkoutLock', transaction);
    });
  }

  #assertAbsent(): void {
    for (const { holder } of this.#state.holders) {
      const status = ownerStatus(holder.pid, holder.host, holder.processStart);
      if (status !== 'absent') {
        throw new ContractError('quarantine', `${this.#places.root}: process ${holder.pid} on ${holder.host} is ${status}`);
      }
    }
  }

  /** Before every effect: the caller's guard, the holders' absence, this root's row and every file as expected. */
  #effect(write: () => void): void {
    this.#guard();
    this.#assertAbsent();
    // Outside the lock: another workspace's transaction may rename roots.json under this read.
    if (rowIdentity(retryingReads(() => this.#registry.rowOf(this.#places.root)).row) !== this.#row) {
      throw new ContractError('conflict', `${this.#places.roots}: this root's row changed since the digest`);
    }
    assertFiles(this.#files, this.#places, this.#expected);
    write();
  }

  #removeIfPresent(key: 'companion' | 'capability' | 'ownerLock' | 'checkoutLock', transaction?: RegistryTransaction, publish?: PublishOptions): void {
    const snapshot = this.#expected[key];
    if (snapshot === undefined) return;
    this.#effect(() => {
      transaction?.assertHeld();
      this.#files.remove(this.#places[key], snapshot, FILE_BYTES[key], publish);
      this.#expected[key] = undefined;
    });
  }
}
