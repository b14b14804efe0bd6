import { randomUUID } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import {
  ContractError,
  DOCUMENT_BYTES,
  WAIT_TICKET_NAME,
  claimSchema,
  decodeBytes,
  encode,
  waitTicketPlaces,
  wakeableTimer,
  type WaitTicketPlaces,
} from '@leasehold/contracts';
import { PrivateFiles, currentProcess, ownerStatus, retryingReads, type FileSnapshot } from '@leasehold/private-files';

const TICKET_SCHEMA = 'leasehold.wait-ticket/1';

/** `leasehold.wait-ticket/1`: a process waiting for a workspace, and since when. */
const ticketSchema = claimSchema(TICKET_SCHEMA);

/** One ticket of the line, as read. */
export interface Ticket {
  readonly path: string;
  /** Its place in line: the number in its name. */
  readonly place: number;
  readonly snapshot: FileSnapshot;
  readonly pid: number;
  readonly host: string;
  readonly processStart?: string | undefined;
}

/** The most tickets read for one workspace: a line longer than this is refused, never cut. */
const MOST_TICKETS = 1024;

/**
 * The waiters of one workspace, first come, first served: each holds a ticket in
 * `<stateHome>/waiters/`, named by its place in line and made by an exclusive create (two waiters
 * that chose the same place: one makes it, the other takes the next). A ticket is removed by its
 * waiter, or by another waiter once its process is proved gone (`absent`: pid and start time),
 * compared against the bytes it read: never because it is old.
 */
export class WaitLine {
  readonly #places: WaitTicketPlaces;
  readonly #root: string;
  readonly #home: PrivateFiles;
  readonly #files: PrivateFiles;

  /** @throws ContractError `refused` for a root or state home that is not absolute and normalised. */
  constructor(root: string, stateHome: string) {
    this.#places = waitTicketPlaces(root, stateHome);
    this.#root = root;
    this.#home = new PrivateFiles(stateHome);
    this.#files = new PrivateFiles(this.#places.folder);
  }

  /** The folder the tickets are in: a change there may move the line. */
  get folder(): string {
    return this.#places.folder;
  }

  /**
   * Takes this process's ticket, at the end of the line.
   * @throws ContractError `refused` (an unsafe folder or file, a malformed ticket).
   */
  join(): Ticket {
    this.#home.directory(this.#places.folder, true);
    this.#files.sweepStaging();
    const bytes = encode({
      schema: TICKET_SCHEMA,
      token: randomUUID(),
      ...currentProcess(),
      root: this.#root,
      since: new Date().toISOString(),
    });
    for (;;) {
      const place = (this.tickets().at(-1)?.place ?? 0) + 1;
      const path = join(this.#places.folder, `${this.#places.prefix}${String(place).padStart(16, '0')}.json`);
      try {
        const snapshot = this.#files.create(path, bytes, DOCUMENT_BYTES);
        return { path, place, snapshot, ...currentProcess() };
      } catch (error) {
        // Another waiter took that place first: the next one.
        if (!ContractError.is(error, 'conflict')) throw error;
      }
    }
  }

  /**
   * Every ticket of this workspace, in line order, once the tickets of waiters proved gone are
   * removed.
   * @throws ContractError `refused` (an unsafe folder or file, a malformed ticket, too long a line).
   */
  tickets(): Ticket[] {
    return this.#read().filter((ticket) => {
      if (!ticket.gone) return true;
      this.leave(ticket);
      return false;
    });
  }

  /**
   * How many wait: the tickets of waiters not proved gone. Changes nothing.
   * @throws ContractError `refused` (an unsafe folder or file, a malformed ticket, too long a line).
   */
  count(): number {
    return this.#read().filter((ticket) => !ticket.gone).length;
  }

  /** Every ticket, in line order, each with whether its waiter's process is proved gone (pid and start time). */
  #read(): (Ticket & { readonly gone: boolean })[] {
    if (!this.#home.directory(this.#places.folder)) return [];
    const names = this.#files
      .entries(this.#places.folder, [WAIT_TICKET_NAME])
      .filter((name) => name.startsWith(this.#places.prefix))
      .sort();
    if (names.length > MOST_TICKETS)
      throw new ContractError('refused', `${this.#places.folder}: more than ${MOST_TICKETS} waiters for one workspace`);
    return names.flatMap((name) => {
      // A ticket being made or removed reads `conflict` for a moment: read it again.
      const ticket = retryingReads(() => this.#readTicket(join(this.#places.folder, name)));
      if (ticket === undefined) return [];
      return [{ ...ticket, gone: ownerStatus(ticket.pid, ticket.host, ticket.processStart) === 'absent' }];
    });
  }

  /**
   * Removes `ticket` if it is still exactly as read (this process's own, or a gone waiter's).
   * @throws ContractError `refused` (an unsafe folder or file).
   */
  leave(ticket: Ticket): void {
    try {
      this.#files.remove(ticket.path, ticket.snapshot, DOCUMENT_BYTES);
    } catch (error) {
      // Gone already, or changed: whoever changed it owns it now.
      if (!ContractError.is(error, 'conflict')) throw error;
    }
  }

  #readTicket(path: string): Ticket | undefined {
    const snapshot = this.#files.read(path, DOCUMENT_BYTES);
    if (snapshot === undefined) return undefined;
    const ticket = decodeBytes(ticketSchema, snapshot.bytes, DOCUMENT_BYTES, path);
    const place = Number(/\.([0-9]{16})\.json$/.exec(path)?.[1]);
    return { path, place, snapshot, pid: ticket.pid, host: ticket.host, processStart: ticket.processStart };
  }
}

/**
 * Resolves after `ms`, or sooner when an entry of one of `folders` changes or `signal` aborts: a
 * notification only ends the wait early, whatever it says.
 */
export async function changeOrTimeout(folders: readonly string[], ms: number, signal?: AbortSignal): Promise<void> {
  const watchers: FSWatcher[] = [];
  const timer = wakeableTimer(ms, signal);
  for (const folder of folders) {
    try {
      watchers.push(watch(folder, { persistent: false }, timer.wake));
    } catch {
      // Not there (yet): the timeout covers it.
    }
  }
  try {
    await timer.ended;
  } finally {
    timer.clear();
    for (const watcher of watchers) watcher.close();
  }
}
