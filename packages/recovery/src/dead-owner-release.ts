import { ContractError, recoverRemedy, type RecoveryView, type Reservation } from '@leasehold/contracts';
import { assertFiles, releaseInOrder, snapshotsOf, type HeldFences, type Workspace } from '@leasehold/coordination';
import { ownerStatus, retryingReads } from '@leasehold/private-files';
import { rowIdentity, type RecoveryRead } from './recovery-state.js';

/**
 * Releases a dead owner's fences as `read` saw them, in coordination's
 * release order (`releaseInOrder`), its one registry transaction taking over
 * a dead holder's lock like any other and completing an interrupted
 * initialisation. Before every effect it calls `guard()` (authority,
 * durability) and re-asserts that every holder is absent and every file, the
 * row included, is as it expects. A failure stops it where it is, with the
 * remaining fences in place: a write that failed is not judged, the next
 * recovery reads what is there.
 */
export async function releaseDeadOwner(workspace: Workspace, read: RecoveryRead, guard: () => void): Promise<void> {
  const { view, service, row, initialisation, ownersCheckout, marksFence } = read;
  if (view.clear) return;
  const snapshots = snapshotsOf(service);
  // Another ownership's mark is neither removed nor asserted: its own state home's recovery owns it.
  if (!marksFence) delete (snapshots as Partial<typeof snapshots>).mark;
  const held: HeldFences = {
    snapshots,
    registration: service.registration?.value,
    row,
    initialisation: initialisation !== undefined,
  };
  await releaseInOrder(workspace, held, {
    check: () => {
      guard();
      assertAbsent(view, workspace);
      assertRow(workspace, held.row);
      assertFiles(workspace, held.snapshots);
    },
    settles: false,
    removesCheckout: ownersCheckout,
  });
}

function assertAbsent(view: RecoveryView, { places }: Workspace): void {
  for (const { holder } of view.holders) {
    const status = ownerStatus(holder.pid, holder.host, holder.processStart);
    if (status !== 'absent') {
      throw new ContractError('quarantine', `${places.root}: process ${holder.pid} on ${holder.host} is ${status}`, {
        remedy: recoverRemedy(places.root, places.stateHome, status),
      });
    }
  }
}

function assertRow({ registry, places }: Workspace, expected: Reservation | undefined): void {
  // Outside the lock: another workspace's transaction may rename roots.json under this read.
  if (rowIdentity(retryingReads(() => registry.rowOf(places.root)).row) !== rowIdentity(expected)) {
    throw new ContractError('conflict', `${places.roots}: this root's row changed since the digest`);
  }
}
