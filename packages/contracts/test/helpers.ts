import { expect } from 'vitest';
import { ContractError } from '../src/contract-error.js';

/** The code of the ContractError that `action` throws, or a description of what happened instead. */
export function codeOf(action: () => unknown): string {
  try {
    action();
  } catch (error) {
    return ContractError.is(error) ? error.code : `not a ContractError: ${String(error)}`;
  }
  return 'no error';
}

/** The message of the `refused` ContractError that `action` throws; fails the test otherwise. */
export function refusal(action: () => unknown): string {
  try {
    action();
  } catch (error) {
    expect(ContractError.is(error, 'refused')).toBe(true);
    return (error as ContractError).message;
  }
  throw new Error('expected a refusal');
}
