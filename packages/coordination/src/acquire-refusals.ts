import { ContractError, recoverRemedy, sha256, type Reservation, type WorkspacePlaces } from '@leasehold/contracts';
import { describeHolder, ownerStatus } from '@leasehold/private-files';
import type { RegistryTransaction } from '@leasehold/registry';
import { readDocument, type ServiceState } from './service-state.js';
import type { Workspace } from './workspace.js';

/**
 * The table's refusals (`admit`). When a row fences the root for a gone or unprovable owner, a
 * companion (the process that owner fenced the workspace with) names who is really in the way:
 * while it lives the workspace is in use, not waiting for a recovery (which refuses until that
 * process is gone), so that is `conflict`; otherwise the quarantine names it too.
 */
export function admitToTable(workspace: Workspace, transaction: RegistryTransaction, reservation: Reservation): void {
  try {
    transaction.admit(reservation);
  } catch (error) {
    if (ContractError.is(error, 'quarantine')) refuseCompanion(workspace, error);
    throw error;
  }
}

function refuseCompanion(workspace: Workspace, quarantine: ContractError): void {
  const { places } = workspace;
  const companion = readDocument(workspace, 'companion')?.value;
  if (companion === undefined) return;
  const status = ownerStatus(companion.pid, companion.host, companion.processStart);
  const holder = describeHolder(companion, status);
  // The row's remedy already names the recovery; a companion that is live, or that cannot be told, says more.
  const remedy = status === 'absent' ? quarantine.remedy : recoverRemedy(places.root, places.stateHome, status);
  const options = { cause: quarantine, ...(remedy === undefined ? {} : { remedy }) };
  if (status === 'live') {
    throw new ContractError(
      'conflict',
      `${places.companion}: the workspace is in use by ${holder}, which its owner fenced it with (${quarantine.message})`,
      options,
    );
  }
  throw new ContractError('quarantine', `${quarantine.message}; ${places.companion} names ${holder}`, options);
}

/**
 * The first fence of this workspace's own files in the way of a new owner. A registration that
 * is not stopped is `quarantine` whoever holds it (a live owner that is `quarantined` or
 * stopping has its row, refused before this); a checkout lock is `conflict` while its holder
 * lives (a plain tool at work) and `quarantine` once it is gone or cannot be proved live.
 */
export function refuseState(
  state: ServiceState,
  configBytes: Uint8Array,
  replaceConfig: boolean,
  places: WorkspacePlaces,
): void {
  const registration = state.registration?.value;
  if (registration !== undefined && registration.phase !== 'stopped') {
    const status = ownerStatus(registration.pid, registration.host, registration.processStart);
    throw new ContractError(
      'quarantine',
      `${places.registration}: phase ${registration.phase}, not stopped: ${describeHolder(registration, status)}`,
      {
        remedy: recoverRemedy(places.root, places.stateHome, status),
      },
    );
  }
  const checkoutLock = state.checkoutLock?.value;
  if (checkoutLock !== undefined) {
    const status = ownerStatus(checkoutLock.pid, checkoutLock.host, checkoutLock.processStart);
    const holder = describeHolder(checkoutLock, status);
    if (status === 'live') {
      throw new ContractError('conflict', `${places.checkoutLock}: held by ${holder}`, {
        remedy: `a tool is at work in the workspace (pid ${checkoutLock.pid}): try again once it is done`,
      });
    }
    throw new ContractError(
      'quarantine',
      `${places.checkoutLock}: left by ${holder}; it stays until the workspace is recovered`,
      {
        remedy: recoverRemedy(places.root, places.stateHome, status),
      },
    );
  }
  if (!replaceConfig && state.config !== undefined && state.config.snapshot.identity !== sha256(configBytes)) {
    throw new ContractError(
      'conflict',
      `${places.config}: another config exists (identity ${state.config.snapshot.identity}); replaceConfig takes the new one on a stopped workspace`,
      {
        path: places.config,
        remedy:
          'the stopped workspace keeps another config (another endpoint, or an earlier version): start it with replaceConfig (the --replace-config option of leasehold serve and leasehold run) to take this one',
      },
    );
  }
}
