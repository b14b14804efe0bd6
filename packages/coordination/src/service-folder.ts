import {
  ContractError,
  SERVICE_FILE_NAMES,
  decode,
  encode,
  ownerConfigSchema,
  recoverRemedy,
  sha256,
  type OwnerConfig,
} from '@leasehold/contracts';
import { ownerStatus, type FileSnapshot } from '@leasehold/private-files';
import type { GuardedWriter } from '@leasehold/registry';
import { FILE_BYTES, bounded, type FileSnapshots, type ServiceState } from './service-state.js';
import type { Workspace } from './workspace.js';
import { selectedState } from './workspace-reads.js';

// A workspace's service folder, published and unpublished whole: made with `format.json` and
// `config.json` by `initializeWorkspace` or a new workspace's acquire, and removed, every file as
// it was read, by an upgrade. A crash leaves the whole folder or none, never a half-initialised one.

/**
 * Creates the service folder with `format.json` and `config.json`, in one
 * atomic publication, inside a registry transaction for this root.
 * Idempotent for the same config.
 * @throws ContractError `conflict` (another config), `quarantine` (a registry row without service state),
 * `refused` (invalid config or state), `busy`/`quarantine` from the registry lock.
 */
export async function initializeWorkspace(workspace: Workspace, config: OwnerConfig): Promise<void> {
  const { places } = workspace;
  const configBytes = encode(decode(ownerConfigSchema, config, 'config'));
  // The transaction is one operation of private-files: the folders are walked once.
  await workspace.registry.transaction(places.root, (transaction) => {
    const state = selectedState(workspace);
    if (state.service) {
      if (state.config?.snapshot.identity !== sha256(configBytes)) {
        throw new ContractError('conflict', `${places.config}: another config exists`);
      }
      return;
    }
    const row = transaction.rowOf(places.root);
    if (row !== undefined) {
      throw new ContractError('quarantine', `${places.roots}: a row for this root has no service state`, {
        remedy: recoverRemedy(places.root, places.stateHome, ownerStatus(row.pid, row.host, row.processStart)),
      });
    }
    publishServiceFolder(workspace, configBytes, transaction.writer);
  });
}

/** The bytes of `format.json` and `config.json` for `configBytes`, bounded before the first write. */
export function serviceFolderBytes(
  workspace: Workspace,
  configBytes: Uint8Array,
): { format: Uint8Array; config: Uint8Array } {
  const { places } = workspace;
  const format = bounded(
    encode({
      schema: 'leasehold.service-format/1',
      root: places.root,
      stateHome: places.stateHome,
      configIdentity: sha256(configBytes),
    }),
    FILE_BYTES.format,
    places.format,
  );
  return { format, config: configBytes };
}

/**
 * Publishes the service folder of a new workspace (and the private root above it) through the
 * registry transaction's `writer`, which proves the lock first; answers its snapshots.
 */
export function publishServiceFolder(
  workspace: Workspace,
  configBytes: Uint8Array,
  writer: GuardedWriter,
): FileSnapshots {
  const { places, files } = workspace;
  const bytes = serviceFolderBytes(workspace, configBytes);
  // format.json and config.json appear together or not at all: a crash
  // here can never leave a half-initialised service folder.
  writer.publishFolder(
    places.service,
    { [SERVICE_FILE_NAMES.format]: bytes.format, [SERVICE_FILE_NAMES.config]: bytes.config },
    FILE_BYTES.format,
  );
  const format = files.read(places.format, FILE_BYTES.format);
  const config = files.read(places.config, FILE_BYTES.config);
  if (format === undefined || config === undefined)
    throw new ContractError('conflict', `${places.service}: changed while published`);
  return { format, config, hostConfig: undefined };
}

/**
 * An upgrade's first step, under the registry lock and only once no fence is left (the
 * refusals ran first): the old service folder goes whole, every file as it was read, so that
 * the acquire publishes the new config as a new workspace's. A crash between the two leaves no
 * service folder: a workspace that never had an owner, fenced by nothing, as it was. The
 * registry transaction's `writer` removes it, after proving the lock.
 */
export function unpublishServiceFolder(workspace: Workspace, state: ServiceState, writer: GuardedWriter): void {
  const files = {
    [SERVICE_FILE_NAMES.format]: state.format?.snapshot,
    [SERVICE_FILE_NAMES.config]: state.config?.snapshot,
    [SERVICE_FILE_NAMES.hostConfig]: state.hostConfig,
    [SERVICE_FILE_NAMES.registration]: state.registration?.snapshot,
  };
  const expected = Object.fromEntries(
    Object.entries(files).filter((entry): entry is [string, FileSnapshot] => entry[1] !== undefined),
  );
  writer.removeFolder(workspace.places.service, expected, Math.max(...Object.values(FILE_BYTES)));
}
