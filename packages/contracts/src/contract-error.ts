/** Every code a Leasehold package throws; see the README for what each asks of a caller. */
export const CONTRACT_ERROR_CODES = [
  'refused',
  'conflict',
  'capacity',
  'quarantine',
  'unavailable',
  'consumed-grant',
  'busy',
] as const;

export type ContractErrorCode = (typeof CONTRACT_ERROR_CODES)[number];

// A brand shared by every installed copy of this package: packages are versioned
// apart, so two copies can meet in one process and `instanceof` would then lie.
const BRAND = Symbol.for('leasehold.contract-error');

/**
 * The one error type of Leasehold. `code` is stable API; the message names a
 * file or a JSON path, never the offending value and never a secret.
 */
export class ContractError extends Error {
  readonly code: ContractErrorCode;
  declare readonly [BRAND]: true;

  constructor(code: ContractErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ContractError';
    this.code = code;
    Object.defineProperty(this, BRAND, { value: true });
  }

  /** True for a ContractError from any copy of this package, optionally of one of `codes`. */
  static is(value: unknown, ...codes: ContractErrorCode[]): value is ContractError {
    if (typeof value !== 'object' || value === null || (value as Record<symbol, unknown>)[BRAND] !== true) {
      return false;
    }
    return codes.length === 0 || codes.includes((value as ContractError).code);
  }
}
