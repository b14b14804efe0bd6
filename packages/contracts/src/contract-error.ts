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

/** What a ContractError may carry besides its code and message. */
export interface ContractErrorOptions {
  /** The error this one was made from. */
  readonly cause?: unknown;
  /** The absolute path of the file or folder the error is about, for tools that act on it (never parse the message). */
  readonly path?: string;
  /**
   * What a person can do about it, in one sentence, set by the layer that knows the fix (a
   * command line to run, pasteable as it is, such as `chmod 700 /path`). Never a secret.
   */
  readonly remedy?: string;
}

/**
 * The one error type of Leasehold. `code` is stable API; the message names a
 * file or a JSON path, never the offending value and never a secret. `path`,
 * when given, is the file or folder the error is about; `remedy`, when given,
 * what a person can do about it, so a program that prints the error prints the fix.
 */
export class ContractError extends Error {
  readonly code: ContractErrorCode;
  /** The file or folder the error is about, when it is about one. */
  declare readonly path?: string;
  /** What a person can do about it, in one sentence, when the layer that threw knows. */
  declare readonly remedy?: string;
  declare readonly [BRAND]: true;

  constructor(code: ContractErrorCode, message: string, options?: ContractErrorOptions) {
    super(message, options); // Error keeps `cause` only when the key is given
    this.name = 'ContractError';
    this.code = code;
    // Own and enumerable only when given, like `cause`: an error about no file has no `path` key.
    if (options?.path !== undefined) Object.defineProperty(this, 'path', { value: options.path, enumerable: true });
    if (options?.remedy !== undefined)
      Object.defineProperty(this, 'remedy', { value: options.remedy, enumerable: true });
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
