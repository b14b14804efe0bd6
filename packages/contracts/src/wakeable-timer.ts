/** A wait that ends after a time, when a signal aborts, or when it is woken, whichever comes first. */
export interface WakeableTimer {
  /** Resolves once the wait ended, however it ended. */
  readonly ended: Promise<void>;
  /** Ends the wait now (a notification that something changed). */
  readonly wake: () => void;
  /** Drops the timer and the abort listener: call it however the wait ended. */
  readonly clear: () => void;
}

/**
 * A wait that ends after `ms` (never, when undefined), when `signal` aborts (at once, if it already
 * did), or when `wake()` is called. The one timer the backends' waiting lines and `connectOrStart`
 * pause with, so that a pause always ends on abort.
 */
export function wakeableTimer(ms: number | undefined, signal?: AbortSignal): WakeableTimer {
  let wake = (): void => {};
  const ended = new Promise<void>((resolve) => {
    wake = resolve;
  });
  // An aborted signal sends no event again.
  if (signal?.aborted === true) wake();
  const timer = ms === undefined ? undefined : setTimeout(wake, ms);
  signal?.addEventListener('abort', wake, { once: true });
  return {
    ended,
    wake,
    clear: () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', wake);
    },
  };
}
