import { ContractError, recoverRemedy, type Reservation } from '@leasehold/contracts';
import { assertFiles, releaseInOrder, snapshotsOf, type HeldFences, type WorkspacePlaces } from '@leasehold/coordination';
import { ownerStatus, retryingReads, type PrivateFiles } from '@leasehold/private-files';
import type { Registry } from '@leasehold/registry';
import { internalsFor, rowIdentity, type RecoveryState } from './recovery-state.js';

/**
 * Releases a dead owner's fences as `state` saw them, in coordination's
 * release order (`releaseInOrder`), its one registry transaction taking over
 * a dead holder's lock like any other and completing an interrupted
 * initialisation. Before every effect it calls `guard()` (authority,
 * durability) and re-asserts that every holder is absent and every file, the
 * row included, is as it expects. A failure stops it where it is, with the
 * remaining fences in place: a write that failed is not judged, the next
 * recovery reads what is there.
 */
export async function releaseDeadOwner(
  files: PrivateFiles,
  registry: Registry,
  places: WorkspacePlaces,
  state: RecoveryState,
  guard: () => void,
): Promise<void> {
  const { service, row, initialisation, ownersCheckout } = internalsFor(state, places);
  if (state.clear) return;
  const held: HeldFences = {
    snapshots: snapshotsOf(service),
    registration: service.registration?.value,
    row,
    initialisation: initialisation !== undefined,
  };
  await releaseInOrder(files, registry, places, held, {
    check: () => {
      guard();
      assertAbsent(state, places);
      assertRow(registry, places, held.row);
      assertFiles(files, places, held.snapshots);
    },
    settles: false,
    removesCheckout: ownersCheckout,
  });
}

function assertAbsent(state: RecoveryState, places: WorkspacePlaces): void {
  for (const { holder } of state.holders) {
    const status = ownerStatus(holder.pid, holder.host, holder.processStart);
    if (status !== 'absent') {
      throw new ContractError('quarantine', `${places.root}: process ${holder.pid} on ${holder.host} is ${status}`, {
        remedy: recoverRemedy(places.root, places.stateHome, status),
      });
    }
  }
}

function assertRow(registry: Registry, places: WorkspacePlaces, expected: Reservation | undefined): void {
  // Outside the lock: another workspace's transaction may rename roots.json under this read.
  if (rowIdentity(retryingReads(() => registry.rowOf(places.root)).row) !== rowIdentity(expected)) {
    throw new ContractError('conflict', `${places.roots}: this root's row changed since the digest`);
  }
}
