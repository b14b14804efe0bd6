import { join } from 'node:path';
import {
  ContractError,
  DOCUMENT_BYTES,
  REGISTRY_FOLDER_ENTRIES,
  TAKEOVER_MARKER,
  decodeBytes,
  registryLockSchema,
  sha256,
  shellQuote,
  takeoverMarker,
  type RegistryLock,
  type StateHomeLayout,
} from '@leasehold/contracts';
import {
  HolderFiles,
  ownerStatus,
  type FileSnapshot,
  type OwnerStatus,
  type PrivateFiles,
} from '@leasehold/private-files';

/** How long a transaction waits for a live holder's lock by default, in milliseconds. */
export const DEFAULT_LOCK_WAIT_MS = 2000;

/**
 * The registry lock is published and removed without its own folder fsync. Its
 * loss or return after a power loss is harmless: the crash ended its holder,
 * and a lock whose holder is gone is taken over by the next writer, so the lock
 * is never a fence; the table it guards is fsynced by its own replace. The
 * recovery package's power-loss exploration proves it: with both fsyncs gone,
 * every crash state of every protocol that takes the lock still holds.
 */
const LOCK_PUBLISH = { syncFolder: false } as const;

/** The registry lock (or a take-over marker) as found on disk, with its holder's liveness. */
export interface RegistryLockState {
  readonly path: string;
  readonly snapshot: FileSnapshot;
  readonly lock: RegistryLock;
  readonly verdict: OwnerStatus;
}

// Lock tokens this process left behind because their removal failed. Such a
// lock names a live process (this one) but guards nothing any more: the next
// transaction of this process takes it over instead of waiting on itself.
const abandonedTokens = new Set<string>();

const sleep = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/** What this host can tell of a lock's holder; a lock this process abandoned guards nothing, so its holder is `absent`. */
function lockVerdict(lock: RegistryLock): OwnerStatus {
  if (lock.pid === process.pid && abandonedTokens.has(lock.token)) return 'absent';
  return ownerStatus(lock.pid, lock.host, lock.processStart);
}

/**
 * The lock protocol of one registry folder: `registry.lock` claimed by an
 * exclusive create (waiting for a live holder, taking over a dead one's
 * through a take-over marker), the markers swept by the holder, and the lock
 * removed by compare-and-swap, success or failure. The lock is never reclaimed
 * by age: only a holder proved `absent` loses it.
 */
export class RegistryLockProtocol {
  readonly #layout: StateHomeLayout;
  readonly #files: PrivateFiles;
  readonly #locks: HolderFiles<RegistryLock>;
  readonly #lockWaitMs: number;

  constructor(layout: StateHomeLayout, files: PrivateFiles, lockWaitMs: number) {
    this.#layout = layout;
    this.#files = files;
    this.#locks = new HolderFiles(files, {
      decode: (path, bytes) => decodeBytes(registryLockSchema, bytes, DOCUMENT_BYTES, path),
      markerOf: (token) => takeoverMarker(layout, token),
      // Every taker goes on waiting for the lock, and sweeps the markers once it holds it (sweepMarkers).
      markerRemovedBy: 'holder',
      verdict: lockVerdict,
      // A holder that cannot be told (another host or PID namespace) is a fence, which no wait ends.
      refuseAmbiguous: ({ path, holder }) =>
        new ContractError(
          'quarantine',
          `${path}: its holder (pid ${holder.pid} on ${holder.host}) cannot be told live or gone from here, so no writer may take it over`,
          {
            path,
            remedy: `no writer may pass that lock until a person checks its holder is gone: \`leasehold doctor --state-home ${shellQuote(layout.stateHome)}\` shows what to check and the command that clears it`,
          },
        ),
    });
    this.#lockWaitMs = lockWaitMs;
  }

  /** The lock file and its holder's liveness, or undefined when there is none. */
  readLock(): RegistryLockState | undefined {
    return this.#readHolder(this.#layout.registryLock);
  }

  /** Take-over markers left in the registry folder, with their holders. */
  readMarkers(): RegistryLockState[] {
    const names = this.#files.entries(this.#layout.registry, REGISTRY_FOLDER_ENTRIES);
    return names
      .filter((name) => TAKEOVER_MARKER.test(name))
      .flatMap((name) => this.#readHolder(join(this.#layout.registry, name)) ?? []);
  }

  /** Publishes `bytes` as the lock, waiting for a live holder and taking over a dead one's; answers the lock's snapshot. */
  async claim(bytes: Uint8Array): Promise<FileSnapshot> {
    const deadline = Date.now() + this.#lockWaitMs;
    for (let attempt = 0; ; attempt += 1) {
      // A dead writer's staging leftover may be a second link of the lock: sweep before judging it.
      this.#files.sweepStaging();
      // Judge a lock that is there before writing one: each attempt to create
      // costs a staged write and its fsync, which waiters must not pay.
      const found = this.#locks.judge(this.#layout.registryLock);
      if (found.kind === 'free') {
        try {
          // No registry folder fsync for the lock (LOCK_PUBLISH): the table's own replace fsyncs that folder.
          return this.#files.create(this.#layout.registryLock, bytes, undefined, LOCK_PUBLISH);
        } catch (error) {
          if (!ContractError.is(error, 'conflict')) throw error;
          continue; // another writer won the race: judge its lock
        }
      }
      if (found.kind === 'dead') {
        const taken = this.#locks.takeOver(found, bytes);
        if (taken !== undefined) return taken;
      }
      if (Date.now() >= deadline) {
        throw new ContractError(
          'busy',
          `${this.#layout.registryLock}: held by a live process for more than ${this.#lockWaitMs} ms`,
          {
            remedy:
              'another process holds the registry for a moment (a leasehold command or an owner starting or stopping); try again in a moment',
          },
        );
      }
      // Jittered exponential backoff up to ~16 ms, so that racing writers spread
      // out and a freed lock does not sit idle for long.
      await sleep(Math.min(2 ** attempt, 16) * (0.5 + Math.random()));
    }
  }

  /**
   * Removes every take-over marker among `folderNames` (the registry folder as the holder listed it), as
   * the lock's holder. While a live writer holds the lock, every marker is stale: it names a token
   * no longer at the lock's place, so the take-over it was for can only fail its compare.
   */
  sweepMarkers(folderNames: readonly string[]): void {
    const names = folderNames.filter((name) => TAKEOVER_MARKER.test(name));
    for (const name of names) {
      const path = join(this.#layout.registry, name);
      try {
        const marker = this.#readHolder(path);
        if (marker !== undefined) this.#files.remove(path, marker.snapshot);
      } catch (error) {
        // A slow writer is publishing, replacing or removing this marker (for a take-over that can
        // only fail its compare now), or its own cleanup came first: leave it to that writer, which
        // sweeps it once it holds the lock (or the next holder does).
        if (!ContractError.is(error, 'conflict')) throw error;
      }
    }
  }

  /**
   * After a claim that failed part-way (a create or take-over whose link or
   * rename went through before a later step failed), removes the lock or
   * marker holding our bytes. What cannot be removed stays naming this live
   * process and is remembered, so this process's next transaction takes it
   * over instead of waiting on itself.
   */
  dropFailedClaim(bytes: Uint8Array, token: string): void {
    try {
      for (const name of this.#files.entries(this.#layout.registry, REGISTRY_FOLDER_ENTRIES)) {
        const path = join(this.#layout.registry, name);
        if (path !== this.#layout.registryLock && !TAKEOVER_MARKER.test(name)) continue;
        const snapshot = this.#files.read(path);
        if (snapshot?.identity === sha256(bytes)) this.#files.remove(path, snapshot);
      }
    } catch {
      abandonedTokens.add(token);
    }
  }

  /**
   * Removes our lock. A failed removal leaves it naming this live process:
   * others wait and answer `busy`, this process's next transaction takes it
   * over, and once this process exits anyone does. A lock whose unlink went
   * through but whose folder fsync failed is gone: the transaction's work
   * stands, and at worst the lock reappears after a power loss, naming a
   * holder that is then absent.
   */
  removeLock(held: FileSnapshot, token: string): void {
    try {
      this.#files.remove(this.#layout.registryLock, held, undefined, LOCK_PUBLISH);
      abandonedTokens.delete(token);
    } catch {
      try {
        if (this.#locks.unchanged(this.#layout.registryLock, held)) abandonedTokens.add(token);
      } catch {
        // Unreadable now: it names this process, and is judged like any lock by the next writer.
      }
    }
  }

  #readHolder(path: string): RegistryLockState | undefined {
    const found = this.#locks.read(path);
    return found === undefined
      ? undefined
      : { path, snapshot: found.snapshot, lock: found.holder, verdict: found.verdict };
  }
}
