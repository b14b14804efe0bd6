import { ContractError } from '@leasehold/contracts';

/** Every error `codeOf` and `codeOfAsync` caught since the last `cleanUp`, for the secrets checks. */
export const caughtErrors: unknown[] = [];

/** The code of a caught ContractError; any other error is rethrown so that it fails the test loudly. */
function codeOfError(error: unknown): string {
  caughtErrors.push(error);
  if (ContractError.is(error)) return error.code;
  throw error;
}

/** The ContractError code `action` throws, or 'no error'; any other error is rethrown. */
export function codeOf(action: () => unknown): string {
  try {
    action();
  } catch (error) {
    return codeOfError(error);
  }
  return 'no error';
}

/** The ContractError code `action` (a promise, or a function that may return one) throws or rejects with, or 'no error'. */
export async function codeOfAsync(action: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof action === 'function' ? action() : action);
  } catch (error) {
    return codeOfError(error);
  }
  return 'no error';
}

/** The ContractError `action` throws, to assert more than its code; the test fails when it throws none, and any other error is rethrown. */
export function contractErrorOf(action: () => unknown): ContractError {
  try {
    action();
  } catch (error) {
    if (ContractError.is(error)) return error;
    throw error;
  }
  throw new Error('expected a ContractError, none was thrown');
}
