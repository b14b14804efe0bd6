import type { Inspection, LocalAccess, NewWorkspace, OwnerConfig } from '@leasehold/contracts';
import { PrivateFiles } from '@leasehold/private-files';
import { Registry } from '@leasehold/registry';
import { Acquisition } from './acquisition.js';
import { registryOptionsOf, type CoordinationOptions } from './coordination-options.js';
import type { OwnerLease } from './owner-lease.js';
import { defaultStateHome, workspacePlaces, type WorkspacePlaces } from './places.js';
import { ServiceFolder } from './service-folder.js';
import { WorkspaceReads } from './workspace-reads.js';

/**
 * One workspace's coordination: who owns it, and the only way to become its
 * owner. Pass the root through `resolveWorkspace` first, so that every path
 * to one folder names one workspace.
 */
export class ServiceCoordination {
  readonly root: string;
  readonly stateHome: string;
  readonly places: WorkspacePlaces;
  readonly #files: PrivateFiles;
  readonly #registry: Registry;
  readonly #reads: WorkspaceReads;
  readonly #serviceFolder: ServiceFolder;
  readonly #acquisition: Acquisition;

  /** @throws ContractError `refused` for a root or state home that is not absolute and normalised, or an invalid `backend`. */
  constructor(workspace: string, options: CoordinationOptions = {}) {
    this.stateHome = options.stateHome ?? defaultStateHome();
    this.places = workspacePlaces(workspace, this.stateHome);
    this.root = this.places.root;
    const hooks = options.hooks === undefined ? {} : { hooks: options.hooks };
    this.#files = new PrivateFiles(this.places.namespace, hooks);
    this.#registry = new Registry(this.stateHome, registryOptionsOf(options));
    this.#reads = new WorkspaceReads(this.places, this.#files, this.#registry);
    this.#serviceFolder = new ServiceFolder(this.places, this.#files, this.#registry, this.#reads);
    this.#acquisition = new Acquisition(this.places, this.#files, this.#registry, this.#reads, this.#serviceFolder);
  }

  /**
   * What the files say of this workspace. Never throws: anything it cannot
   * prove (a state between two steps of another process, a change while
   * reading, any broken rule, an unsafe state home) is `unavailable`. A live
   * owner in phase `idle` is `unavailable` too: files alone cannot prove a
   * live, authenticated owner; a client proves that over the transport. Other
   * workspaces' transactions never change the answer: it reads only this
   * root's row of the table.
   */
  inspect(): Inspection {
    return this.#reads.inspect();
  }

  /**
   * Creates the service folder with `format.json` and `config.json`, in one
   * atomic publication, inside a registry transaction for this root.
   * Idempotent for the same config.
   * @throws ContractError `conflict` (another config), `quarantine` (a registry row without service state),
   * `refused` (invalid config or state), `busy`/`quarantine` from the registry lock.
   */
  async initialize(config: OwnerConfig): Promise<void> {
    await this.#serviceFolder.initialize(config);
  }

  /**
   * Makes this process the owner. Refusals, first that applies: `boundEndpoint`
   * not concrete or not the config's (`conflict`); then, in a registry
   * transaction, a row with an overlapping root or the same endpoint
   * (`conflict`); a full registry (`capacity`); a state that breaks a rule of
   * the selected state (`refused`); a registration that is not stopped
   * (`quarantine`); a held checkout lock or another config (`conflict`).
   *
   * Inside the transaction the reservation is published first, then (for a
   * workspace with no service state) the service folder; from then on the
   * row fences the root, and the rest runs outside the lock: `initializeNew`,
   * the checkout lock, `owner.lock`, the capability, the registration in phase
   * `idle`, each after re-asserting the row and every file written so far.
   * A failure after the reservation rolls back what this call wrote, in
   * reverse order, ending with the row; a rollback step that fails leaves the
   * rest as a visible fence, which `recover` clears once this process exits.
   *
   * With `replaceConfig`, another existing config is no refusal on a stopped
   * workspace (an upgrade): inside the transaction, after every refusal
   * above, the old service folder is unpublished whole, compare-and-swap on
   * every file read, and the workspace is then acquired as a new one
   * (`initializeNew` runs).
   */
  async acquire(
    config: OwnerConfig,
    boundEndpoint: string = config.endpoint,
    initializeNew?: (workspace: NewWorkspace) => void | Promise<void>,
    options: { readonly epoch?: string; readonly replaceConfig?: boolean } = {},
  ): Promise<OwnerLease> {
    return this.#acquisition.acquire(config, boundEndpoint, initializeNew, options);
  }

  /**
   * The workspace's config, or undefined before `initialize`.
   * @throws ContractError `refused` for an invalid state, `conflict` when files kept changing.
   */
  configuration(): OwnerConfig | undefined {
    return this.#reads.configuration();
  }

  /**
   * Endpoint, epoch and capability of a registered, not stopped owner whose
   * exact row is in the table.
   * @throws ContractError `unavailable` otherwise (the message says why, never the secret).
   */
  localAccess(): LocalAccess {
    return this.#reads.localAccess();
  }
}
