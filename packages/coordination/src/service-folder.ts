import { ContractError, decode, encode, ownerConfigSchema, recoverRemedy, sha256, type OwnerConfig } from '@leasehold/contracts';
import { ownerStatus, type FileSnapshot, type PrivateFiles } from '@leasehold/private-files';
import type { GuardedWriter, Registry } from '@leasehold/registry';
import type { WorkspacePlaces } from './places.js';
import { FILE_BYTES, bounded, type FileSnapshots, type ServiceState } from './service-state.js';
import type { WorkspaceReads } from './workspace-reads.js';

/**
 * A workspace's service folder, published and unpublished whole: made with
 * `format.json` and `config.json` by `initialize` or a new workspace's
 * acquire, and removed, every file as it was read, by an upgrade. A crash
 * leaves the whole folder or none, never a half-initialised one.
 */
export class ServiceFolder {
  readonly #places: WorkspacePlaces;
  readonly #files: PrivateFiles;
  readonly #registry: Registry;
  readonly #reads: WorkspaceReads;

  constructor(places: WorkspacePlaces, files: PrivateFiles, registry: Registry, reads: WorkspaceReads) {
    this.#places = places;
    this.#files = files;
    this.#registry = registry;
    this.#reads = reads;
  }

  /** Creates the service folder inside a registry transaction for this root; see `ServiceCoordination.initialize`. */
  async initialize(config: OwnerConfig): Promise<void> {
    const configBytes = encode(decode(ownerConfigSchema, config, 'config'));
    await this.#registry.transaction(this.#places.root, (transaction) => {
      const state = this.#reads.selectedState();
      if (state.service) {
        if (state.config?.snapshot.identity !== sha256(configBytes)) {
          throw new ContractError('conflict', `${this.#places.config}: another config exists`);
        }
        return;
      }
      const row = transaction.rowOf(this.#places.root);
      if (row !== undefined) {
        throw new ContractError('quarantine', `${this.#places.roots}: a row for this root has no service state`, {
          remedy: recoverRemedy(this.#places.root, this.#places.stateHome, ownerStatus(row.pid, row.host, row.processStart)),
        });
      }
      this.publish(configBytes, transaction.writer);
    });
  }

  /** The bytes of `format.json` and `config.json` for `configBytes`, bounded before the first write. */
  bytes(configBytes: Uint8Array): { format: Uint8Array; config: Uint8Array } {
    const format = bounded(
      encode({ schema: 'leasehold.service-format/1', root: this.#places.root, stateHome: this.#places.stateHome, configIdentity: sha256(configBytes) }),
      FILE_BYTES.format,
      this.#places.format,
    );
    return { format, config: configBytes };
  }

  /**
   * Publishes the service folder of a new workspace (and the private root above it) through the
   * registry transaction's `writer`, which proves the lock first; answers its snapshots.
   */
  publish(configBytes: Uint8Array, writer: GuardedWriter): FileSnapshots {
    const bytes = this.bytes(configBytes);
    // format.json and config.json appear together or not at all: a crash
    // here can never leave a half-initialised service folder.
    writer.publishFolder(this.#places.service, { 'format.json': bytes.format, 'config.json': bytes.config }, FILE_BYTES.format);
    const format = this.#files.read(this.#places.format, FILE_BYTES.format);
    const config = this.#files.read(this.#places.config, FILE_BYTES.config);
    if (format === undefined || config === undefined) throw new ContractError('conflict', `${this.#places.service}: changed while published`);
    return { format, config, hostConfig: undefined };
  }

  /**
   * An upgrade's first step, under the registry lock and only once no fence is left (the
   * refusals ran first): the old service folder goes whole, every file as it was read, so that
   * the acquire publishes the new config as a new workspace's. A crash between the two leaves no
   * service folder: a workspace that never had an owner, fenced by nothing, as it was. The
   * registry transaction's `writer` removes it, after proving the lock.
   */
  unpublish(state: ServiceState, writer: GuardedWriter): void {
    const files = { 'format.json': state.format?.snapshot, 'config.json': state.config?.snapshot, 'host-config.json': state.hostConfig, 'registration.json': state.registration?.snapshot };
    const expected = Object.fromEntries(Object.entries(files).filter((entry): entry is [string, FileSnapshot] => entry[1] !== undefined));
    writer.removeFolder(this.#places.service, expected, Math.max(...Object.values(FILE_BYTES)));
  }
}
