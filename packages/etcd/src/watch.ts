// The watch that follows the members: one stream at a time, on an answering member, moved
// when that member turns silent. The stream itself (etcd's watch protocol) is opened by the
// seam (etcd-client.ts, the one module that knows `etcd3`) through `open`.
import { ContractError } from '@leasehold/contracts';
import type { Watch, WatchHandlers } from './etcd-client-types.js';
import type { Member, MemberClient, Members } from './members.js';

/** Opens one watch stream on one member's client from `startRevision` on. */
type OpenWatch<Client> = (client: Client, startRevision: string, handlers: WatchHandlers) => Watch;

/**
 * A watch on the member that answered last, moved when that member turns silent: a new stream on an
 * answering member from the revision after the last event delivered (so no event is missed, and none
 * is delivered twice), the old one cancelled once the new one is in place. A move that fails leaves
 * the watch where it is: a silent member only delays an early warning (the fenced compare and the
 * local deadline are the safety), and must not cost a lease. A stream that ends still ends the watch.
 */
export function watchAcross<Client extends MemberClient>(
  members: Members<Client>,
  openOn: OpenWatch<Client>,
  startRevision: string,
  handlers: WatchHandlers,
): Watch {
  let delivered = BigInt(startRevision) - 1n;
  let ended = false;
  const open = (member: Member<Client>): Watch => {
    const watch: Watch = openOn(member.client, (delivered + 1n).toString(), {
      onEvents: (events) => {
        const fresh = events.filter((event) => BigInt(event.kv.modRevision) > delivered);
        const last = fresh.at(-1);
        if (last === undefined) return;
        delivered = BigInt(last.kv.modRevision);
        handlers.onEvents(fresh);
      },
      // Only the stream in use ends the watch: a replaced one, or a move that failed, does not.
      onEnd: (reason) => {
        if (watch !== current.watch || ended) return;
        ended = true;
        stopListening();
        handlers.onEnd(reason);
      },
    });
    return watch;
  };
  const first = members.ordered()[0];
  if (first === undefined) throw new ContractError('refused', 'endpoints: name at least one etcd member');
  let current = { member: first, watch: open(first) };
  let moving: Watch | undefined;
  const move = async (): Promise<void> => {
    const target = members.ordered()[0];
    if (
      ended ||
      moving !== undefined ||
      current.member.silentSince === undefined ||
      target === undefined ||
      target === current.member ||
      target.silentSince !== undefined
    )
      return;
    moving = open(target);
    const created = await moving.created.then(
      () => true,
      () => false,
    );
    const next = moving;
    moving = undefined;
    if (!created || ended) return;
    const old = current.watch;
    current = { member: target, watch: next };
    old.cancel();
  };
  const stopListening = members.onChange(() => void move());
  return {
    created: current.watch.created,
    cancel: () => {
      moving?.cancel();
      current.watch.cancel();
    },
  };
}
