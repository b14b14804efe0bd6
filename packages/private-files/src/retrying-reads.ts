import { ContractError } from '@leasehold/contracts';

const pauseCell = new Int32Array(new SharedArrayBuffer(4));

/**
 * Runs a read that may race a writer (`read` of PrivateFiles answers
 * `conflict` for a file replaced or removed under it). A `conflict` from a read means a file
 * was replaced or removed under it (a rename is atomic, so the next read sees
 * a whole file): try again a few times, pausing a millisecond, then give up
 * with the last conflict. Synchronous, so reads stay in one turn of the loop.
 */
export function retryingReads<T>(read: () => T, attempts = 20): T {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return read();
    } catch (error) {
      if (!ContractError.is(error, 'conflict') || attempt >= attempts) throw error;
      Atomics.wait(pauseCell, 0, 0, 1);
    }
  }
}
