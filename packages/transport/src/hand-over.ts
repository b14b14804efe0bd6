import { ContractError, parse, shellQuote } from '@leasehold/contracts';
import type { Connection } from './client.js';

/** What an asker sends with `POST /v1/hand-over`, and what the owner's `onHandOverRequested` is given. */
export interface HandOverRequest {
  /** Why the asker wants the workspace: 1 to 200 printable characters (see `handOverReasonProblem`). */
  readonly reason?: string;
}

/**
 * The owner's answer to a hand-over request: release now (exactly as an authenticated stop), release once
 * `work` settles (the asker is answered at once; a stop or signal meanwhile still stops), or refuse with a
 * reason the asker sees (1 to 200 printable characters).
 */
export type HandOverDecision =
  | { readonly decision: 'release' }
  | { readonly decision: 'release-after'; readonly work: PromiseLike<unknown> }
  | { readonly decision: 'refuse'; readonly reason: string };

/** What `askHandOver` resolves to: the owner accepted, and releases now or after its current work. */
export interface HandOverAccepted {
  readonly decision: 'release' | 'release-after';
}

/** A hand-over the owner accepted and has not yet released, as `GET /v1/status` shows it. */
export interface HandOverPending {
  readonly asked: true;
  readonly reason?: string;
  readonly decision: 'release' | 'release-after';
}

/** Decides each hand-over request; see `ServeOptions.onHandOverRequested`. */
type HandOverDecider = (request: HandOverRequest) => HandOverDecision | PromiseLike<HandOverDecision>;

/** The most characters (code points) a hand-over reason may have. */
const REASON_CHARACTERS = 200;

/** What makes a reason unprintable: control and format characters, and lone surrogates (not text). */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}]/u;

/**
 * What is wrong with a hand-over reason, or undefined when it is one: a string of 1 to 200 characters with no
 * control or format character (no newline, no escape sequence, no bidirectional override): the asker's and the
 * owner's reasons are printed on the other side's terminal. The words never repeat the value.
 */
export function handOverReasonProblem(reason: unknown): string | undefined {
  if (typeof reason !== 'string') return 'not a string';
  const characters = [...reason].length;
  if (characters === 0 || characters > REASON_CHARACTERS)
    return `${characters} characters, not 1 to ${REASON_CHARACTERS}`;
  if (UNPRINTABLE.test(reason)) return 'holds a control or format character (a newline, an escape, ...)';
  return undefined;
}

/** The request a `POST /v1/hand-over` body asks for (empty, or `{"reason": text}`), or what is wrong with it. */
export function handOverRequestOf(bytes: Uint8Array): { request: HandOverRequest } | { problem: string } {
  if (bytes.byteLength === 0) return { request: {} };
  let body: unknown;
  try {
    // Untrusted bytes, parsed as every document is (no duplicate key, no byte-order mark); the handler bounded them.
    body = parse(bytes, bytes.byteLength, 'body');
  } catch (error) {
    if (!ContractError.is(error, 'refused')) throw error;
    return { problem: `the body is not JSON (${error.message})` };
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return { problem: 'the body is not a JSON object' };
  if (Object.keys(body).some((key) => key !== 'reason')) return { problem: 'the body has a key other than "reason"' };
  if (!('reason' in body)) return { request: {} };
  const problem = handOverReasonProblem(body.reason);
  return problem === undefined ? { request: { reason: body.reason as string } } : { problem: `reason: ${problem}` };
}

/** A refusal the owner did not choose: it could not decide, so it keeps serving (fail closed). */
function couldNotDecide(why: string): HandOverDecision {
  return { decision: 'refuse', reason: `the owner could not decide on a hand-over: ${why}` };
}

/** The decision `decide` answered, checked: anything but a well-formed one is a refusal (fail closed). */
async function decisionOf(decide: HandOverDecider | undefined, request: HandOverRequest): Promise<HandOverDecision> {
  // An owner that says nothing of hand-overs has no work to finish: it releases, as on a stop.
  if (decide === undefined) return { decision: 'release' };
  let given: unknown;
  try {
    given = await decide(request);
  } catch {
    // Its error is the daemon's own: never sent to the asker, who may be any local client.
    return couldNotDecide('its onHandOverRequested failed');
  }
  const answer = (typeof given === 'object' && given !== null ? given : {}) as Record<string, unknown>;
  if (answer.decision === 'release') return { decision: 'release' };
  if (answer.decision === 'release-after' && typeof (answer.work as PromiseLike<unknown>)?.then === 'function')
    return { decision: 'release-after', work: answer.work as PromiseLike<unknown> };
  if (answer.decision === 'refuse') {
    const problem = handOverReasonProblem(answer.reason);
    return problem === undefined
      ? { decision: 'refuse', reason: answer.reason as string }
      : couldNotDecide(`its refusal's reason: ${problem}`);
  }
  return couldNotDecide('its onHandOverRequested answered no decision');
}

/** An answer of the desk: what to tell the asker, and what to do once that answer is written. */
interface HandOverAnswer {
  readonly decision: HandOverDecision['decision'];
  readonly reason?: string;
  /** Called once the answer is written: the release, now or after the work. Absent for a refusal or a repeat. */
  readonly afterAnswer?: () => void;
}

/**
 * The owner's hand-over desk: decides one request at a time (the callback never runs twice at once), and keeps the
 * hand-over it accepted until the owner releases. A request that comes after an accepted one gets the same answer,
 * without asking the owner again. A refusal is not kept: the asker has its reason, and the owner serves on as if
 * it had never been asked.
 */
export function handOverDesk(decide: HandOverDecider | undefined, release: () => void) {
  let accepted: HandOverPending | undefined;
  let turn: Promise<unknown> = Promise.resolve();
  return {
    /** The hand-over accepted and not yet released, for `GET /v1/status`. */
    pending: (): HandOverPending | undefined => accepted,
    ask(request: HandOverRequest): Promise<HandOverAnswer> {
      const answered = turn.then(async (): Promise<HandOverAnswer> => {
        if (accepted !== undefined) return { decision: accepted.decision };
        const decision = await decisionOf(decide, request);
        if (decision.decision === 'refuse') return decision;
        accepted = {
          asked: true,
          ...(request.reason === undefined ? {} : { reason: request.reason }),
          decision: decision.decision,
        };
        if (decision.decision === 'release') return { decision: 'release', afterAnswer: release };
        // Settled either way, the work is over: its outcome is the owner's to report, the release is ours.
        return {
          decision: 'release-after',
          afterAnswer: () =>
            void Promise.resolve(decision.work).then(
              () => release(),
              () => release(),
            ),
        };
      });
      turn = answered.catch(() => {});
      return answered;
    },
  };
}

/**
 * Asks the owner of `connection` to hand the workspace over (`POST /v1/hand-over`), giving it `request.reason`.
 * Resolves once the owner accepted: it releases now, or after its current work; wait until the workspace reads
 * stopped (as `leasehold stop` does) to know it has.
 * @throws ContractError `conflict` when the owner refused, its reason in the message; `refused` for a reason
 * that is not 1 to 200 printable characters (nothing is sent), or an owner that takes no hand-over requests;
 * `unavailable` when the owner does not answer, or answers anything else.
 */
export async function askHandOver(connection: Connection, request: HandOverRequest = {}): Promise<HandOverAccepted> {
  const { root } = connection.status;
  if (request.reason !== undefined) {
    const problem = handOverReasonProblem(request.reason);
    if (problem !== undefined) {
      throw new ContractError('refused', `hand-over reason: ${problem}`, {
        remedy: `give a reason of 1 to ${REASON_CHARACTERS} printable characters, on one line, or none`,
      });
    }
  }
  const reply = await connection.request(
    'POST',
    '/v1/hand-over',
    request.reason === undefined ? undefined : { reason: request.reason },
  );
  const body = (typeof reply.body === 'object' && reply.body !== null ? reply.body : {}) as Record<string, unknown>;
  if (reply.status === 202 && (body.decision === 'release' || body.decision === 'release-after'))
    return { decision: body.decision };
  if (reply.status === 409) {
    const reason =
      handOverReasonProblem(body.reason) === undefined ? (body.reason as string) : 'no reason it could read';
    throw new ContractError('conflict', `${root}: its owner refused to hand it over: ${reason}`, {
      remedy: `wait until the owner is done and ask again, or stop it regardless: leasehold stop --workspace ${shellQuote(root)}`,
    });
  }
  if (reply.status === 404 || reply.status === 405) {
    throw new ContractError(
      'refused',
      `${root}: its owner takes no hand-over requests (it answered ${reply.status}: it was built on an earlier @leasehold/transport)`,
      { remedy: `stop it regardless: leasehold stop --workspace ${shellQuote(root)}; or update its daemon` },
    );
  }
  throw new ContractError('unavailable', `${root}: its owner answered ${reply.status} to the hand-over request`);
}
