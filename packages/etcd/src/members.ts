// Per-member routing: which member of the cluster each request goes to, and the members'
// health that decides it. etcd3's own pool would pick a member at random and never avoid one
// that stopped answering, so the seam (etcd-client.ts) keeps one client per member and hands
// them to `Members`. The client type is left open here: only the seam knows `etcd3`.
import { performance } from 'node:perf_hooks';

/**
 * How long a member may leave a request unanswered before it counts as silent and a request that is
 * safe to repeat (a keep-alive, a read, a fenced write) is sent to the next member too. A healthy
 * member answers in milliseconds; 500 ms leaves room for a busy machine's stall while letting two
 * hedges fit in the shortest lease window etcd grants (its minimum TTL, 2 s, leaves 1.5 s after a
 * keep-alive's send time before the owner's default deadline).
 */
export const HEDGE_MS = 500;

/**
 * How long a silent member is left out before a keep-alive or a read is also copied to it, so that a
 * member back from a pause (or a restart) comes back into use; any answer from it does too.
 */
const PROBE_AFTER_MS = 2000;

/** What routing needs of a member's client; the requests themselves are the caller's. */
export interface MemberClient {
  close(): void;
}

/** One member, with a client of its own (so that Leasehold chooses the member of each request), and how it answers. */
export interface Member<Client> {
  readonly client: Client;
  /** `performance.now()` of its last answer. */
  answeredAt: number;
  /** Since when it has been silent (a request unanswered past `HEDGE_MS`, or no connection); undefined while it answers. */
  silentSince: number | undefined;
  /** When a copy of a request last went to it while silent, to see whether it answers again. */
  probedAt: number;
}

/**
 * The members and their health. etcd3's own pool picks a member at random for each request and
 * never avoids one that stopped answering: a paused (SIGSTOP) member keeps its sockets open, so each
 * request sent to it waits out its whole deadline. Here a member that leaves a request unanswered
 * past `HEDGE_MS` is silent and tried last, until any answer from it (even a late one) revives it.
 */
export class Members<Client extends MemberClient> {
  readonly #members: readonly Member<Client>[];
  readonly #listeners = new Set<() => void>();

  /** `unanswered` tells an error etcd never answered (no connection, a deadline passed, a stream cut) from an answer it gave. */
  constructor(
    clients: readonly Client[],
    readonly unanswered: (error: unknown) => boolean,
  ) {
    this.#members = clients.map((client) => ({ client, answeredAt: 0, silentSince: undefined, probedAt: 0 }));
  }

  /** Answering members first, the one that answered last first; then silent ones, the one silent longest last. */
  ordered(): Member<Client>[] {
    const answering = this.#members
      .filter((member) => member.silentSince === undefined)
      .sort((a, b) => b.answeredAt - a.answeredAt);
    const silent = this.#members
      .filter((member) => member.silentSince !== undefined)
      .sort((a, b) => (b.silentSince ?? 0) - (a.silentSince ?? 0));
    return [...answering, ...silent];
  }

  /** The silent members not tried for `PROBE_AFTER_MS`, marked tried now. */
  dueProbes(): Member<Client>[] {
    const now = performance.now();
    const due = this.#members.filter(
      (member) =>
        member.silentSince !== undefined && now - Math.max(member.silentSince, member.probedAt) >= PROBE_AFTER_MS,
    );
    for (const member of due) member.probedAt = now;
    return due;
  }

  /** Runs `request` on `member`, recording whether and when it answered. */
  async run<T>(member: Member<Client>, request: (client: Client) => Promise<T>): Promise<T> {
    const silent = (): void => {
      if (member.silentSince !== undefined) return;
      member.silentSince = performance.now();
      this.#changed();
    };
    const timer = setTimeout(silent, HEDGE_MS);
    timer.unref();
    try {
      const answer = await request(member.client);
      this.#answered(member);
      return answer;
    } catch (error) {
      if (this.unanswered(error)) silent();
      else this.#answered(member);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Calls `listener` each time a member turns silent or answers again; the answer unsubscribes. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  close(): void {
    for (const member of this.#members) member.client.close();
  }

  #answered(member: Member<Client>): void {
    member.answeredAt = performance.now();
    if (member.silentSince === undefined) return;
    member.silentSince = undefined;
    this.#changed();
  }

  #changed(): void {
    for (const listener of this.#listeners) listener();
  }
}

/**
 * Sends `request` to one member at a time, answering ones first, the next only once one failed
 * without an answer (no connection, the member without a leader), as etcd3's own retry did: never
 * while a copy is still under way, which could apply after a second one. All copies share one
 * deadline, so one that waited it out on a silent member leaves none for the next. A silent member
 * is tried only after every answering one.
 */
export async function oneAtATime<Client extends MemberClient, T>(
  members: Members<Client>,
  request: (client: Client) => Promise<T>,
): Promise<T> {
  let lastError: unknown;
  for (const member of members.ordered()) {
    try {
      return await members.run(member, request);
    } catch (error) {
      if (!members.unanswered(error)) throw error;
      lastError = error;
    }
  }
  throw lastError;
}
