import type { Inspection, MarkedOwnership, OwnerSummary } from './ownership.js';

/**
 * One change in what `inspect` answers for a root, as `Ownership.watch` delivers it: the whole
 * answer (level-triggered), numbered.
 */
export interface WatchSnapshot {
  /**
   * 1 for the first snapshot, then one more for each change the watch saw. A `resync` may skip
   * numbers: the changes it did not deliver one by one.
   */
  readonly seq: number;
  readonly status: Inspection['status'];
  /** The owner's epoch, or a stopped workspace's last (null when it never had one). */
  readonly epoch?: string | null;
  readonly owner?: OwnerSummary;
  readonly phase?: OwnerSummary['phase'];
  /** How many times the owner's record was written (see `OwnerSummary`), where the backend counts them. */
  readonly version?: number;
  /** Why the answer is `unavailable` (never a secret). */
  readonly reason?: string;
  /** Between two steps of a live process's acquire or release: a passing state. */
  readonly inProgress?: true;
  /** The ownership through another state home the folder's mark names (see `Inspection`). */
  readonly marked?: MarkedOwnership;
  /**
   * Read afresh after a gap the watch cannot rule out: the consumer fell behind, a change came
   * that no notification announced, or the backend lost its history (a compacted etcd revision).
   * Changes before it may not have been delivered; what it says is the state now.
   */
  readonly resync?: true;
}

/** How a watch runs. */
export interface WatchOptions {
  /** Ends the watch: the iteration finishes, and every notification and timer is let go. */
  readonly signal?: AbortSignal;
  /**
   * How often the state is read even without a notification, in milliseconds (default 1000): the
   * longest a change can go unseen when a notification is lost, and how soon an owner's process
   * that died (which changes no file) is seen gone.
   */
  readonly pollMs?: number;
  /** How many snapshots wait for a consumer that does not keep up before they become one `resync` (default 16). */
  readonly maxQueued?: number;
}

/** What a backend tells a watch: a notification that the state may have changed, or that one may have been missed. */
export interface WatchWakeups {
  /** Something the state is read from changed: read it again. */
  readonly changed: () => void;
  /** A change may have been missed (history lost, a stream restarted): the next snapshot is a `resync`. */
  readonly gap: () => void;
}

/** A backend's source of wake-ups for one root: started once, stopped by the function it answers. */
export type WatchSource = (wakeups: WatchWakeups) => () => void;

const DEFAULT_POLL_MS = 1000;
const DEFAULT_MAX_QUEUED = 16;

/** The snapshot of one answer (without its number). */
function snapshotOf(inspection: Inspection): Omit<WatchSnapshot, 'seq'> {
  switch (inspection.status) {
    case 'absent':
      return { status: 'absent' };
    case 'stopped': {
      const { epoch, version } = inspection;
      return { status: 'stopped', epoch, ...(version === undefined ? {} : { phase: 'stopped', version }) };
    }
    case 'unavailable': {
      const { owner, reason, inProgress, marked } = inspection;
      return {
        status: 'unavailable',
        reason,
        ...(owner === undefined ? {} : ownerPart(owner)),
        ...(inProgress === true ? { inProgress } : {}),
        ...(marked === undefined ? {} : { marked }),
      };
    }
    default:
      return { status: inspection.status, ...ownerPart(inspection.owner) };
  }
}

/** What `inspect` answered, as a watch snapshot tells it: `snapshotOf` turned back. */
export function snapshotInspection(snapshot: WatchSnapshot): Inspection {
  const { status, owner, reason } = snapshot;
  switch (status) {
    case 'absent':
      return { status };
    case 'stopped': {
      const { version } = snapshot;
      return { status, epoch: snapshot.epoch ?? null, ...(version === undefined ? {} : { version }) };
    }
    case 'unavailable':
      return {
        status,
        reason: reason ?? '',
        ...(owner === undefined ? {} : { owner }),
        ...(snapshot.inProgress === true ? { inProgress: true } : {}),
        ...(snapshot.marked === undefined ? {} : { marked: snapshot.marked }),
      };
    default:
      return { status, owner: owner! };
  }
}

function ownerPart(owner: OwnerSummary): Pick<WatchSnapshot, 'owner' | 'epoch' | 'phase' | 'version'> {
  return {
    owner,
    epoch: owner.epoch,
    phase: owner.phase,
    ...(owner.version === undefined ? {} : { version: owner.version }),
  };
}

/** What the files (or keys) say, without what this host judges of the owner's process. */
function recordedPart(snapshot: Omit<WatchSnapshot, 'seq'>): string {
  const { owner, ...rest } = snapshot;
  return JSON.stringify([rest, owner === undefined ? null : { ...owner, process: null }]);
}

/** The owner's record's epoch and `version`, where the backend counts its writes. */
function recordOf(snapshot: Omit<WatchSnapshot, 'seq'>): { epoch: string; version: number } | undefined {
  const version = snapshot.version;
  return typeof snapshot.epoch === 'string' && version !== undefined ? { epoch: snapshot.epoch, version } : undefined;
}

/**
 * Whether a write of the owner's record came and went between two answers: its `version` grew by
 * more than one, or a new epoch began after a record not seen `stopped` (its release's or
 * recovery's last write), or was seen past its first write.
 */
function passedOver(last: Omit<WatchSnapshot, 'seq'> | undefined, next: Omit<WatchSnapshot, 'seq'>): boolean {
  const before = last === undefined ? undefined : recordOf(last);
  const after = recordOf(next);
  if (before === undefined || after === undefined) return false;
  if (before.epoch === after.epoch) return after.version - before.version > 1 || after.version < before.version;
  return last?.phase !== 'stopped' || after.version > 1;
}

/**
 * The watch every backend answers `Ownership.watch` with: `inspect` read once at the start and
 * again on each wake-up of `source` and every `pollMs`, a snapshot delivered for each answer that
 * differs from the last. A change the poll found that no notification announced (what the files
 * or keys record changed, not just the verdict on a process, which no notification can announce)
 * is delivered as a `resync`, and so is the first answer after `source` reports a gap (even when
 * unchanged) and the state now when more than `maxQueued` snapshots wait for the consumer.
 * Changes that come and go between two reads are not seen: what each snapshot says held when it
 * was read.
 */
export function watchInspections(
  inspect: () => Promise<Inspection>,
  source: WatchSource,
  options: WatchOptions = {},
): AsyncIterable<WatchSnapshot> {
  return { [Symbol.asyncIterator]: () => new InspectionWatch(inspect, source, options) };
}

/** The running state of one watch: reads in turn, never two at once. */
class InspectionWatch implements AsyncIterator<WatchSnapshot> {
  readonly #inspect: () => Promise<Inspection>;
  readonly #maxQueued: number;
  readonly #queue: WatchSnapshot[] = [];
  readonly #stopSource: () => void;
  readonly #timer: NodeJS.Timeout;
  readonly #signal: AbortSignal | undefined;
  #consumer: ((result: IteratorResult<WatchSnapshot>) => void) | undefined;
  #last: Omit<WatchSnapshot, 'seq'> | undefined;
  /** The last snapshot that was not a passing state without a record: what a passed-over write is judged against. */
  #lastTold: Omit<WatchSnapshot, 'seq'> | undefined;
  #seq = 0;
  #reading = false;
  /** Another read is due (the first, or one woken while a read ran). */
  #due = true;
  #notified = false;
  #gap = false;
  #ended = false;

  constructor(inspect: () => Promise<Inspection>, source: WatchSource, options: WatchOptions) {
    this.#inspect = inspect;
    this.#maxQueued = options.maxQueued ?? DEFAULT_MAX_QUEUED;
    this.#signal = options.signal;
    this.#stopSource = source({
      changed: () => this.#wake(true),
      gap: () => {
        this.#gap = true;
        this.#wake(true);
      },
    });
    this.#timer = setInterval(() => this.#wake(false), options.pollMs ?? DEFAULT_POLL_MS);
    this.#signal?.addEventListener('abort', this.#end, { once: true });
    if (this.#signal?.aborted === true) this.#end();
    else void this.#read();
  }

  next(): Promise<IteratorResult<WatchSnapshot>> {
    const queued = this.#queue.shift();
    if (queued !== undefined) return Promise.resolve({ value: queued, done: false });
    if (this.#ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.#consumer = resolve;
    });
  }

  return(): Promise<IteratorResult<WatchSnapshot>> {
    this.#end();
    return Promise.resolve({ value: undefined, done: true });
  }

  #wake(announced: boolean): void {
    if (announced) this.#notified = true;
    if (this.#ended) return;
    this.#due = true;
    if (!this.#reading) void this.#read();
  }

  async #read(): Promise<void> {
    while (this.#due && !this.#ended) {
      this.#reading = true;
      this.#due = false;
      const notified = this.#notified;
      this.#notified = false;
      const gap = this.#gap;
      this.#gap = false;
      const inspection = await this.#inspect().catch((error: unknown): Inspection => ({
        status: 'unavailable',
        reason: `the state could not be read: ${String(error)}`,
      }));
      // A notification of a change made before the read is delivered by the next turn of the event
      // loop: a poll that ran just before it found an announced change.
      await new Promise<void>((resolve) => setImmediate(resolve));
      this.#reading = false;
      if (this.#ended) return;
      this.#deliver(snapshotOf(inspection), notified || this.#notified, gap);
    }
  }

  #deliver(snapshot: Omit<WatchSnapshot, 'seq'>, notified: boolean, gap: boolean): void {
    const last = this.#last;
    const changed = last === undefined || JSON.stringify(last) !== JSON.stringify(snapshot);
    if (!changed && !gap) return;
    // A recorded change that no notification announced: one may have been lost, and with it a state between.
    const unannounced = last !== undefined && !notified && recordedPart(last) !== recordedPart(snapshot);
    this.#last = snapshot;
    if (changed) this.#seq += 1;
    // A passing state (between two steps of an acquire or release) may not tell the record: a phase passed over
    // before it is judged against the record seen before it, not lost with it.
    const resync = gap || unannounced || passedOver(this.#lastTold, snapshot) || this.#queue.length >= this.#maxQueued;
    if (snapshot.inProgress !== true || recordOf(snapshot) !== undefined) this.#lastTold = snapshot;
    const value: WatchSnapshot = { seq: this.#seq, ...snapshot, ...(resync ? { resync: true } : {}) };
    if (this.#consumer !== undefined) {
      const consumer = this.#consumer;
      this.#consumer = undefined;
      consumer({ value, done: false });
      return;
    }
    // A consumer that fell behind gets the state now, marked, instead of every change it missed.
    if (this.#queue.length >= this.#maxQueued) this.#queue.length = 0;
    this.#queue.push(value);
  }

  readonly #end = (): void => {
    if (this.#ended) return;
    this.#ended = true;
    clearInterval(this.#timer);
    this.#signal?.removeEventListener('abort', this.#end);
    this.#stopSource();
    const consumer = this.#consumer;
    this.#consumer = undefined;
    consumer?.({ value: undefined, done: true });
  };
}
