// Hedging: a request that is safe to apply more than once (a keep-alive, a read, a fenced
// write) goes to the next member too whenever one is slow to answer, so that a paused member
// costs `HEDGE_MS`, not a whole deadline. Requests that must not apply twice use
// `oneAtATime` (members.ts) instead.
import { HEDGE_MS, type Member, type MemberClient, type Members } from './members.js';

/**
 * Sends `request` to the first member in order and, each time `HEDGE_MS` passes (or a copy fails)
 * without an answer, to the next one too; with `probe`, also at once to each silent member due a
 * probe. The first answer wins (a refusal from etcd too); the other copies are left to finish. Only
 * for requests that are safe to apply more than once.
 */
export function hedged<Client extends MemberClient, T>(
  members: Members<Client>,
  request: (client: Client) => Promise<T>,
  probe = false,
): Promise<T> {
  const probes = probe ? members.dueProbes() : [];
  const order = members.ordered().filter((member) => !probes.includes(member));
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let outstanding = 0;
    let lastError: unknown;
    let timer: NodeJS.Timeout | undefined;
    const settle = (finish: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      finish();
    };
    const send = (member: Member<Client>): void => {
      outstanding += 1;
      members.run(member, request).then(
        (answer) => settle(() => resolve(answer)),
        (error: unknown) => {
          outstanding -= 1;
          if (!members.unanswered(error)) settle(() => reject(error));
          else if (!settled) {
            lastError = error;
            if (!sendNext() && outstanding === 0) settle(() => reject(lastError));
          }
        },
      );
    };
    const sendNext = (): boolean => {
      clearTimeout(timer);
      const member = order.shift();
      if (member === undefined) return false;
      send(member);
      timer = setTimeout(sendNext, HEDGE_MS);
      timer.unref();
      return true;
    };
    sendNext();
    for (const member of probes) send(member);
  });
}
