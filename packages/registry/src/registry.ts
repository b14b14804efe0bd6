import { randomUUID } from 'node:crypto';
import {
  ContractError,
  REGISTRY_BYTES,
  absolutePath,
  describeBackend,
  encode,
  sameBackend,
  type Backend,
  type Reservation,
  REGISTRY_FOLDER_ENTRIES,
  stateHomeLayout,
  type StateHomeLayout,
  type FileSystemAllowance,
} from '@leasehold/contracts';
import {
  PrivateFiles,
  currentProcess,
  fileOperation,
  type FileOperation,
  type FileSnapshot,
  type PrivateFilesHooks,
} from '@leasehold/private-files';
import { DEFAULT_LOCK_WAIT_MS, RegistryLockProtocol, type RegistryLockState } from './registry-lock.js';
import {
  FILE_BACKEND,
  checkBackend,
  checkFormat,
  decodeRoots,
  encodeFormat,
  encodeTable,
  recordedBackend,
} from './registry-view.js';
import { assertFileSystem, sameAllowance } from './file-system-check.js';
import { allowancesOf, ensureStateHome, reachStateHome } from './state-home-setup.js';
import { Transaction, type RegistryTransaction } from './transaction.js';

export interface RegistryOptions {
  /** Handed to every PrivateFiles the registry uses (tests only). */
  readonly hooks?: PrivateFilesHooks;
  /** Bound of the wait for a lock held by a live process, then `busy`. */
  readonly lockWaitMs?: number;
  /**
   * The backend the caller uses this state home with (default the file backend). A transaction
   * that creates `format.json` records it there; one on a state home that records another is `refused`.
   */
  readonly backend?: Backend;
  /**
   * A file system whose guarantees are not proven that this caller allows the state home on (what
   * `leasehold init --allow-fs` passes, once a verifier passed there): `initialize()` records it in
   * `format.json`, after which every caller is allowed. Without it, or once recorded, such a state
   * home is `refused` at every operation.
   */
  readonly allowFileSystem?: FileSystemAllowance;
}

/** One whole read of the table, without the lock. */
export interface RegistryView {
  readonly entries: readonly Reservation[];
  readonly format: FileSnapshot | undefined;
  readonly roots: FileSnapshot | undefined;
}

/** One root's reservation (or none), from one whole read of `roots.json`. */
export interface RowRead {
  readonly row: Reservation | undefined;
  readonly roots: FileSnapshot | undefined;
}

// The format.json each operation read, by path: kept with the operation and gone with it.
const provedFormats = new WeakMap<FileOperation, Map<string, FileSnapshot>>();

/**
 * The reservation table of one state home (`<stateHome>/v1/registry/`): every
 * owner's reservation, so that no two owners serve overlapping roots or one
 * endpoint. Writers serialise on `registry.lock` for one read-check-swap of
 * the table; readers never look at the lock (`roots.json` is always whole).
 */
export class Registry {
  readonly layout: StateHomeLayout;
  readonly #files: PrivateFiles;
  readonly #home: PrivateFiles;
  readonly #lock: RegistryLockProtocol;
  readonly #hooks: PrivateFilesHooks | undefined;
  readonly #backend: Backend;
  /** The `format.json` this registry writes for a new state home. */
  readonly #formatBytes: Uint8Array;
  readonly #allowFileSystem: FileSystemAllowance | undefined;

  /**
   * @throws ContractError `refused` when `stateHome` is not absolute and normalised, or `backend`
   * is not a valid one (or would make a format document larger than DOCUMENT_BYTES, 8192 bytes).
   */
  constructor(stateHome: string, options: RegistryOptions = {}) {
    this.layout = stateHomeLayout(stateHome);
    this.#hooks = options.hooks;
    const hooks = options.hooks === undefined ? {} : { hooks: options.hooks };
    this.#files = new PrivateFiles(this.layout.namespace, hooks);
    this.#home = new PrivateFiles(this.layout.stateHome, hooks);
    this.#lock = new RegistryLockProtocol(this.layout, this.#files, options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS);
    this.#backend = checkBackend(options.backend ?? FILE_BACKEND, 'registry backend');
    this.#allowFileSystem = options.allowFileSystem;
    this.#formatBytes = encodeFormat(
      this.layout.stateHome,
      this.#backend,
      this.layout.registryFormat,
      options.allowFileSystem,
    );
  }

  /**
   * Proves the state home itself is safe (a real 0700 folder of this user, no
   * link, on a file system whose guarantees are proven or that it allows), as
   * every reader must before it trusts anything below it.
   * Answers false when it does not exist (nor, maybe, its parents): readers
   * then see an empty table, and only a writer creates it.
   * @throws ContractError `refused` for an unsafe or unreachable state home, or one on a file system not allowed.
   */
  checkStateHome(): boolean {
    return reachStateHome(this.#home, this.layout.stateHome, this.#allowFileSystem);
  }

  /**
   * Refuses a workspace `root` on a file system whose guarantees are not proven, unless this state
   * home allows that one (recorded in `format.json`, or this registry's `allowFileSystem`): a
   * workspace another host sees too could be served by two state homes at once.
   * @throws ContractError `refused` naming the root, its file system and the remedy.
   */
  checkWorkspace(root: string): void {
    assertFileSystem(
      root,
      this.layout.stateHome,
      'workspace',
      allowancesOf(this.#home, this.layout.stateHome, true, this.#allowFileSystem),
    );
  }

  /**
   * One whole read of the table without the lock. Format alone (an
   * interrupted initialisation) and no registry at all read as no entries.
   * @throws ContractError `refused` (unsafe state home or file, invalid table), `conflict` (a file changed while read).
   */
  list(): RegistryView {
    return fileOperation((operation) => {
      this.checkStateHome();
      const { format, roots } = this.#read(operation);
      return { entries: this.#validate(format, roots), format, roots };
    });
  }

  /**
   * `root`'s reservation, or none, from one whole read of `roots.json`.
   * @throws ContractError as `list`.
   */
  rowOf(root: string): RowRead {
    const view = this.list();
    return { row: view.entries.find((entry) => entry.root === root), roots: view.roots };
  }

  /**
   * Whether `roots.json` is still the file an earlier `list` or `rowOf` read (`roots` of its answer),
   * by one lstat: a writer always replaces it whole, as a new file. A reader that read the table,
   * then other files, proves with it that the table did not move meanwhile.
   */
  tableUnchanged(roots: FileSnapshot | undefined): boolean {
    return this.#files.unchanged(this.layout.roots, roots);
  }

  /**
   * The lock file and its holder's liveness, or undefined when there is none (for diagnosis).
   * @throws ContractError `refused` (malformed or unsafe lock), `conflict` (changing while read).
   */
  readLock(): RegistryLockState | undefined {
    return this.#lock.readLock();
  }

  /**
   * Take-over markers left in the registry folder, with their holders (for diagnosis).
   * @throws ContractError as `readLock`.
   */
  readMarkers(): RegistryLockState[] {
    return fileOperation(() => this.#lock.readMarkers());
  }

  /**
   * Runs `operation` under the registry lock for `root`: sweep staging, take
   * the lock (waiting for a live holder, taking over a dead one's), complete
   * an interrupted initialisation, validate, operate; then, success or
   * failure, remove the lock. The operation reads and swaps the table, plus
   * at most one per-workspace publication that must not race it.
   * @throws ContractError `busy` (a live holder outlasted the wait), `quarantine`
   * (a holder that cannot be told: another host or PID namespace), `refused`
   * (an invalid registry or unsafe file; a state home that records another
   * backend, before anything is written), and whatever `operation` throws.
   */
  async transaction<T>(root: string, operation: (transaction: RegistryTransaction) => T | Promise<T>): Promise<T> {
    if (!absolutePath.safeParse(root).success)
      throw new ContractError('refused', 'transaction root: not an absolute, normalised path');
    // One operation of private-files: each folder from the state home down is walked once, here.
    return fileOperation((files) => this.#transaction(root, operation, files));
  }

  async #transaction<T>(
    root: string,
    operation: (transaction: RegistryTransaction) => T | Promise<T>,
    files: FileOperation,
  ): Promise<T> {
    ensureStateHome(this.layout.stateHome, this.#hooks, this.#allowFileSystem);
    this.#files.directory(this.layout.registry, true);
    const token = randomUUID();
    const bytes = encode({ schema: 'leasehold.registry-lock/1', token, ...currentProcess(), root });
    let held: FileSnapshot;
    try {
      held = await this.#lock.claim(bytes);
    } catch (error) {
      this.#lock.dropFailedClaim(bytes, token);
      throw error;
    }
    try {
      // One read of each file under the lock: the backend is judged and the table validated from it.
      const { names, format, roots } = this.#read(files);
      // Before anything else is written: a state home of another backend is not this caller's to change.
      this.#assertBackend(format);
      this.#lock.sweepMarkers(names);
      const transaction = new Transaction(
        this.layout,
        this.#files,
        root,
        held,
        this.#completeInitialisation(held, format, roots),
      );
      return await operation(transaction);
    } finally {
      this.#lock.removeLock(held, token);
    }
  }

  /**
   * Records this registry's backend in a new state home (format.json, and the empty roots.json),
   * or completes an interrupted initialisation; reserves nothing. Idempotent. Its lock names the
   * state home itself as the transaction's root.
   * @throws ContractError `refused` when the state home records another backend (nothing written),
   * and as `transaction`.
   */
  async initialize(): Promise<void> {
    await this.transaction(this.layout.stateHome, () => undefined);
  }

  /** The registry folder's names, checked, then `format.json` and `roots.json`, each read once. */
  #read(operation: FileOperation): {
    names: string[];
    format: FileSnapshot | undefined;
    roots: FileSnapshot | undefined;
  } {
    const names = this.#files.entries(this.layout.registry, REGISTRY_FOLDER_ENTRIES);
    return {
      names,
      format: this.#format(operation),
      roots: this.#files.read(this.layout.roots, REGISTRY_BYTES),
    };
  }

  /**
   * `format.json`, read in full the first time an operation needs it; later in the same
   * operation, the snapshot it read, once one lstat proved the file is still that incarnation
   * (only a new file replaces it: it is published by `create`, never changed). `roots.json`,
   * whose bytes every caller compares, is always read whole.
   */
  #format(operation: FileOperation): FileSnapshot | undefined {
    const path = this.layout.registryFormat;
    const proved = provedFormats.get(operation)?.get(path);
    if (proved !== undefined && this.#files.unchanged(path, proved)) return proved;
    const format = this.#files.read(path);
    if (format !== undefined) {
      const byPath = provedFormats.get(operation) ?? new Map<string, FileSnapshot>();
      byPath.set(path, format);
      provedFormats.set(operation, byPath);
    }
    return format;
  }

  /**
   * Records this registry's file-system allowance in a `format.json` that does not name it yet: a
   * replace compared against the bytes read, under the lock. The state home's other fields stay.
   */
  #recordAllowance(held: FileSnapshot, format: FileSnapshot): void {
    const allowed = this.#allowFileSystem;
    if (allowed === undefined) return;
    const recorded = checkFormat(format, this.layout.stateHome, this.layout.registryFormat);
    if (sameAllowance(recorded.allowedFileSystem, allowed)) return;
    const backend = recorded.backend ?? this.#backend;
    this.#files.assert(this.layout.registryLock, held);
    this.#files.replace(
      this.layout.registryFormat,
      format,
      encodeFormat(this.layout.stateHome, backend, this.layout.registryFormat, allowed),
    );
  }

  /** Refuses, under the lock and before any write, a state home that records another backend. */
  #assertBackend(format: FileSnapshot | undefined): void {
    if (format === undefined) return;
    const recorded = recordedBackend(format, this.layout.stateHome, this.layout.registryFormat);
    if (sameBackend(recorded, this.#backend)) return;
    throw new ContractError(
      'refused',
      `${this.layout.stateHome} uses the ${describeBackend(recorded)}, not the ${describeBackend(this.#backend)}: open it with that backend`,
      { path: this.layout.registryFormat },
    );
  }

  #validate(format: FileSnapshot | undefined, roots: FileSnapshot | undefined): Reservation[] {
    if (roots !== undefined && format === undefined) {
      throw new ContractError('refused', `${this.layout.roots}: exists without format.json`);
    }
    if (format !== undefined) checkFormat(format, this.layout.stateHome, this.layout.registryFormat);
    if (roots === undefined) return [];
    return [...decodeRoots(roots, this.layout.stateHome, this.layout.roots)];
  }

  /**
   * Both files absent: create both (the empty table, and a format document
   * recording this registry's backend); format alone: create roots. An unexpected name in the registry folder is refused first, as
   * readers refuse it. Answers the table the transaction starts from.
   */
  #completeInitialisation(
    held: FileSnapshot,
    format: FileSnapshot | undefined,
    roots: FileSnapshot | undefined,
  ): { entries: Reservation[]; roots: FileSnapshot } {
    if (format !== undefined) this.#recordAllowance(held, format);
    if (roots !== undefined) return { entries: this.#validate(format, roots), roots };
    const rootsBytes = encodeTable([], this.layout.roots);
    this.#files.assert(this.layout.registryLock, held);
    if (format === undefined) this.#files.create(this.layout.registryFormat, this.#formatBytes);
    return { entries: [], roots: this.#files.create(this.layout.roots, rootsBytes, REGISTRY_BYTES) };
  }
}
