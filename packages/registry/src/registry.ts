import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  ContractError,
  DOCUMENT_BYTES,
  REGISTRY_BYTES,
  absolutePath,
  decodeBytes,
  encode,
  registryLockSchema,
  type RegistryLock,
  type Reservation,
} from '@leasehold/contracts';
import {
  PrivateFiles,
  currentProcess,
  ownerStatus,
  sameSnapshot,
  type FileSnapshot,
  type OwnerStatus,
  type PrivateFilesHooks,
} from '@leasehold/private-files';
import { checkFormat, decodeRoots, encodeEntries } from './registry-view.js';

/** The namespace folder below a state home; every Leasehold file lives under it. */
export const NAMESPACE_FOLDER = 'v1';
/** The only names allowed in `<ns>/registry/`. */
export const REGISTRY_FOLDER_ENTRIES = ['format.json', 'roots.json', 'registry.lock'] as const;
/** How long a transaction waits for a live holder's lock by default, in milliseconds. */
export const DEFAULT_LOCK_WAIT_MS = 2000;

export interface RegistryOptions {
  /** Handed to every PrivateFiles the registry uses (tests only). */
  readonly hooks?: PrivateFilesHooks;
  /** Bound of the wait for a lock held by a live process, then `busy`. */
  readonly lockWaitMs?: number;
}

/** A lock-free read of the registry, for readers that must not block writers. */
export interface RegistryPeek {
  readonly entries: readonly Reservation[];
  readonly format: FileSnapshot | undefined;
  readonly roots: FileSnapshot | undefined;
  /** A `registry.lock` exists, or was being published or removed while it was read. */
  readonly locked: boolean;
}

/** The registry lock as found on disk, with its holder's liveness. */
export interface RegistryLockState {
  readonly snapshot: FileSnapshot;
  readonly lock: RegistryLock;
  readonly holder: OwnerStatus;
}

export interface TransactionOptions {
  /**
   * A lock whose holder is absent, to take over by compare-and-swap instead of
   * waiting for a free lock (recovery only).
   */
  readonly takeOver?: FileSnapshot;
}

/** What an operation inside `transaction` may do. */
export interface RegistryTransaction {
  /** The validated reservations as the transaction last read or wrote them. */
  readonly entries: readonly Reservation[];
  /** True once anything was written: a failure from then on retains the lock. */
  readonly dirty: boolean;
  /** Declares that writes begin; call it after every document to be written is encoded and checked. */
  markDirty(): void;
  /**
   * Proves the lock is still this transaction's and `roots.json` is as it last saw it.
   * @throws ContractError `conflict`.
   */
  assertHeld(): void;
  /**
   * The bytes `writeEntries(entries)` would write, checked against every rule and bound.
   * @throws ContractError `capacity` (over REGISTRY_ENTRIES or REGISTRY_BYTES), `refused` (overlap, shared endpoint).
   */
  encodeEntries(entries: readonly Reservation[]): Uint8Array;
  /**
   * Compare-and-swap of `roots.json`: checks, marks dirty, asserts the lock, writes.
   * @throws ContractError `capacity` or `refused` before anything is written; `conflict` if the lock or file moved.
   */
  writeEntries(entries: readonly Reservation[]): void;
}

/**
 * Makes the state home (0700) and its missing ancestors. The ancestors lie
 * outside Leasehold's private root; the state home itself is checked like
 * every private folder.
 * @throws ContractError `refused` for an unsafe state home.
 */
export function ensureStateHome(stateHome: string, hooks?: PrivateFilesHooks): void {
  mkdirSync(dirname(stateHome), { recursive: true, mode: 0o700 });
  new PrivateFiles(stateHome, hooks === undefined ? {} : { hooks }).directory(stateHome, true);
}

const sleep = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/**
 * The registry of one state home (`<stateHome>/v1/registry/`): every
 * reservation, so that no two owners serve overlapping roots or one endpoint.
 * Writers serialise on `registry.lock`; readers never wait (`peek`).
 */
export class Registry {
  readonly stateHome: string;
  readonly namespace: string;
  readonly folder: string;
  readonly formatPath: string;
  readonly rootsPath: string;
  readonly lockPath: string;
  readonly #files: PrivateFiles;
  readonly #hooks: PrivateFilesHooks | undefined;
  readonly #lockWaitMs: number;
  #decoded: { readonly identity: string; readonly entries: readonly Reservation[] } | undefined;

  /** @throws ContractError `refused` when `stateHome` is not absolute and normalised. */
  constructor(stateHome: string, options: RegistryOptions = {}) {
    if (!absolutePath.safeParse(stateHome).success) {
      throw new ContractError('refused', 'state home: not an absolute, normalised path');
    }
    this.stateHome = stateHome;
    this.namespace = join(stateHome, NAMESPACE_FOLDER);
    this.folder = join(this.namespace, 'registry');
    this.formatPath = join(this.folder, 'format.json');
    this.rootsPath = join(this.folder, 'roots.json');
    this.lockPath = join(this.folder, 'registry.lock');
    this.#hooks = options.hooks;
    this.#files = new PrivateFiles(this.namespace, options.hooks === undefined ? {} : { hooks: options.hooks });
    this.#lockWaitMs = options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS;
  }

  /**
   * Reads the registry without the lock. Format alone (an interrupted
   * initialisation) reads as no entries.
   * @throws ContractError `refused` (invalid registry or unsafe file), `conflict` (a file changed while read).
   */
  peek(): RegistryPeek {
    this.#files.entries(this.folder, REGISTRY_FOLDER_ENTRIES);
    const locked = this.#lockPresent();
    const format = this.#files.read(this.formatPath);
    const roots = this.#files.read(this.rootsPath, REGISTRY_BYTES);
    const entries = this.#validate(format, roots);
    return { entries, format, roots, locked };
  }

  /**
   * Proves that no lock appeared and `roots.json` is still the snapshot of `peek`.
   * @throws ContractError `conflict` otherwise.
   */
  assertUnchanged(peek: RegistryPeek): void {
    if (this.#lockPresent()) throw new ContractError('conflict', `${this.lockPath}: a writer holds the registry`);
    this.#files.assert(this.rootsPath, peek.roots, REGISTRY_BYTES);
  }

  /**
   * The lock file and its holder's liveness, or undefined when there is none.
   * @throws ContractError `refused` (malformed or unsafe lock), `conflict` (changing while read).
   */
  readLock(): RegistryLockState | undefined {
    const snapshot = this.#files.read(this.lockPath);
    if (snapshot === undefined) return undefined;
    const lock = decodeBytes(registryLockSchema, snapshot.bytes, DOCUMENT_BYTES, this.lockPath);
    return { snapshot, lock, holder: ownerStatus(lock.pid, lock.host, lock.processStart) };
  }

  /**
   * Runs `operation` under the registry lock (SPEC 4): sweep staging, take the
   * lock, complete an interrupted initialisation, validate, operate. On
   * success the lock is removed. On failure before any write it is removed
   * too; after a write it is kept and marked `retained`, so that everyone
   * else answers `quarantine` until recovery proves what happened.
   * @throws ContractError `busy` (a live holder outlasted the wait), `quarantine`
   * (a retained lock, or one whose holder is gone or cannot be told), `refused`
   * (an invalid registry), and whatever `operation` throws.
   */
  async transaction<T>(
    operation: (transaction: RegistryTransaction) => T | Promise<T>,
    options: TransactionOptions = {},
  ): Promise<T> {
    ensureStateHome(this.stateHome, this.#hooks);
    this.#files.directory(this.folder, true);
    const held = options.takeOver === undefined ? await this.#takeLock() : this.#takeOver(options.takeOver);
    const transaction = new Transaction(this, this.#files, held, options.takeOver?.bytes);
    try {
      transaction.begin(this.#completeInitialisation(transaction));
      const result = await operation(transaction);
      this.#files.remove(this.lockPath, held);
      return result;
    } catch (error) {
      this.#abandon(transaction, held);
      throw error;
    }
  }

  #validate(format: FileSnapshot | undefined, roots: FileSnapshot | undefined): Reservation[] {
    if (roots !== undefined && format === undefined) {
      throw new ContractError('refused', `${this.rootsPath}: exists without format.json`);
    }
    if (format !== undefined) checkFormat(format, this.stateHome, this.formatPath);
    if (roots === undefined) return [];
    // The identity is the SHA-256 of the bytes: the same identity is the same,
    // already validated, list. Readers that poll a large registry decode it once.
    if (this.#decoded?.identity !== roots.identity) {
      const entries = decodeRoots(roots, this.stateHome, this.rootsPath).map((entry) => Object.freeze(entry));
      this.#decoded = { identity: roots.identity, entries };
    }
    return [...this.#decoded.entries];
  }

  #lockPresent(): boolean {
    try {
      return this.#files.read(this.lockPath) !== undefined;
    } catch (error) {
      if (ContractError.is(error, 'conflict')) return true;
      throw error;
    }
  }

  #lockBytes(): Uint8Array {
    return encode({ schema: 'leasehold.registry-lock/1', token: randomUUID(), ...currentProcess(), retained: false });
  }

  /**
   * Takes over the lock seen as `expected` by compare-and-swap, only while
   * its holder is `absent`: the way recovery lifts a dead writer's fence (and
   * a dead recovery's), without ever expiring a lock by age.
   */
  #takeOver(expected: FileSnapshot): FileSnapshot {
    this.#files.sweepStaging();
    const found = this.readLock();
    if (found === undefined || !sameSnapshot(found.snapshot, expected)) {
      throw new ContractError('conflict', `${this.lockPath}: not the lock to take over`);
    }
    if (found.holder !== 'absent') {
      throw new ContractError('quarantine', `${this.lockPath}: its holder is ${found.holder}, not absent`);
    }
    return this.#files.replace(this.lockPath, expected, this.#lockBytes());
  }

  async #takeLock(): Promise<FileSnapshot> {
    const bytes = this.#lockBytes();
    const deadline = Date.now() + this.#lockWaitMs;
    for (let attempt = 0; ; attempt += 1) {
      // A dead writer's staging leftover may be a second link of the lock: sweep before judging it.
      this.#files.sweepStaging();
      // Judge a lock that is there before writing one: each attempt to create
      // costs a staged write and its fsync, which waiters must not pay.
      if (!this.#shortHold()) {
        try {
          return this.#files.create(this.lockPath, bytes);
        } catch (error) {
          if (!ContractError.is(error, 'conflict')) throw error;
          continue; // another writer won the race: judge its lock
        }
      }
      if (Date.now() >= deadline) {
        throw new ContractError('busy', `${this.lockPath}: held by a live process for more than ${this.#lockWaitMs} ms`);
      }
      // Jittered exponential backoff up to ~16 ms, so that racing writers spread
      // out and a freed lock does not sit idle for long.
      await sleep(Math.min(2 ** attempt, 16) * (0.5 + Math.random()));
    }
  }

  /**
   * Whether the existing lock is a short hold worth waiting for (true), or
   * already gone (false). A retained lock or one whose holder is absent or
   * ambiguous is a fence: never expired by age, only lifted by recovery.
   */
  #shortHold(): boolean {
    let state: RegistryLockState | undefined;
    try {
      state = this.readLock();
    } catch (error) {
      if (ContractError.is(error, 'conflict')) return true; // being published or removed
      throw error;
    }
    if (state === undefined) return false;
    if (state.lock.retained) {
      throw new ContractError('quarantine', `${this.lockPath}: retained by a writer that failed; run recovery`);
    }
    if (state.holder !== 'live') {
      // A holder that removed its lock and exited between our read and the
      // liveness check reads `absent` too. Only a lock still there, unchanged,
      // after its holder was seen gone was left behind: a fence.
      if (!this.#unchangedLock(state.snapshot)) return true;
      throw new ContractError('quarantine', `${this.lockPath}: its holder is ${state.holder}; run recovery`);
    }
    return true;
  }

  /** Whether the lock is still exactly `snapshot` (a lock being replaced or removed is not). */
  #unchangedLock(snapshot: FileSnapshot): boolean {
    try {
      return sameSnapshot(this.#files.read(this.lockPath), snapshot);
    } catch (error) {
      if (ContractError.is(error, 'conflict')) return false;
      throw error;
    }
  }

  /**
   * Step 2: both files absent, create both; format alone, create roots. Either is a write.
   * An unexpected name in the registry folder is refused first, as `peek` refuses it.
   */
  #completeInitialisation(transaction: Transaction): Reservation[] {
    this.#files.entries(this.folder, REGISTRY_FOLDER_ENTRIES);
    const format = this.#files.read(this.formatPath);
    let roots = this.#files.read(this.rootsPath, REGISTRY_BYTES);
    if (roots === undefined) {
      const formatBytes = encode({ schema: 'leasehold.registry-format/1', stateHome: this.stateHome });
      const rootsBytes = encodeEntries([], this.stateHome, this.rootsPath);
      if (format !== undefined) checkFormat(format, this.stateHome, this.formatPath);
      transaction.markDirty();
      if (format === undefined) this.#files.create(this.formatPath, formatBytes);
      roots = this.#files.create(this.rootsPath, rootsBytes, REGISTRY_BYTES);
      transaction.roots = roots;
      return [];
    }
    transaction.roots = roots;
    return this.#validate(format, roots);
  }

  #abandon(transaction: Transaction, held: FileSnapshot): void {
    try {
      if (!transaction.dirty && transaction.takenOver !== undefined) {
        // Nothing written: put the dead writer's lock back as it was, so its fence stays.
        this.#files.replace(this.lockPath, held, transaction.takenOver);
        return;
      }
      if (!transaction.dirty) {
        this.#files.remove(this.lockPath, held);
        return;
      }
      const lock = decodeBytes(registryLockSchema, held.bytes, DOCUMENT_BYTES, this.lockPath);
      this.#files.replace(this.lockPath, held, encode({ ...lock, retained: true }));
    } catch {
      // The original error is what the caller needs. A lock left as it was
      // names this process, and reads as a fence once this process is gone.
    }
  }
}

class Transaction implements RegistryTransaction {
  entries: readonly Reservation[] = [];
  dirty = false;
  roots: FileSnapshot | undefined;
  readonly #registry: Registry;
  readonly #files: PrivateFiles;
  readonly #lock: FileSnapshot;

  readonly takenOver: Uint8Array | undefined;

  constructor(registry: Registry, files: PrivateFiles, lock: FileSnapshot, takenOver: Uint8Array | undefined) {
    this.#registry = registry;
    this.#files = files;
    this.#lock = lock;
    this.takenOver = takenOver;
  }

  begin(entries: readonly Reservation[]): void {
    this.entries = entries;
  }

  markDirty(): void {
    this.dirty = true;
  }

  assertHeld(): void {
    this.#files.assert(this.#registry.lockPath, this.#lock);
    this.#files.assert(this.#registry.rootsPath, this.roots, REGISTRY_BYTES);
  }

  encodeEntries(entries: readonly Reservation[]): Uint8Array {
    return encodeEntries(entries, this.#registry.stateHome, this.#registry.rootsPath);
  }

  writeEntries(entries: readonly Reservation[]): void {
    const bytes = this.encodeEntries(entries);
    this.assertHeld();
    if (this.roots === undefined) throw new ContractError('conflict', `${this.#registry.rootsPath}: not read`);
    this.markDirty();
    this.roots = this.#files.replace(this.#registry.rootsPath, this.roots, bytes, REGISTRY_BYTES);
    this.entries = [...entries];
  }
}
