import { ContractError, type ContractErrorOptions } from '@leasehold/contracts';

/**
 * The kind of remedy that fits a state home this host cannot open as it records, for a caller to
 * put in its own words (the `leasehold` command writes the command line; a daemon its log line):
 * - `set-both-or-neither`: the two `variables` go together; set both, or unset both.
 * - `set-also`: what is set needs `variables` too.
 * - `readable-file`: point `variables[0]` at a readable PEM file (`path` is the one that is not).
 * - `install-etcd`: the state home records etcd, and `@leasehold/etcd` cannot be loaded: it is missing
 *   (a bundle that keeps it external, as `leasehold`'s does, and a deployment that left it out).
 */
export type StateHomeRemedy = 'set-both-or-neither' | 'set-also' | 'readable-file' | 'install-etcd';

// Shared by every installed copy of this package, as ContractError's own brand is: two copies can
// meet in one process (a daemon's and the command's), and `instanceof` would then lie.
const BRAND = Symbol.for('leasehold.state-home-error');

/**
 * A `refused` ContractError about this host's setup, not about a file in the state home: what is
 * missing or half set, with the kind of remedy that fits and the environment variables it is about.
 * Retrying does not help; the remedy does. The message names variables and paths, never a value
 * read from them.
 */
export class StateHomeError extends ContractError {
  readonly remedy: StateHomeRemedy;
  /** The environment variables the remedy is about (none for `install-etcd`). */
  readonly variables: readonly string[];
  declare readonly [BRAND]: true;

  constructor(message: string, remedy: StateHomeRemedy, variables: readonly string[], options?: ContractErrorOptions) {
    super('refused', message, options);
    this.name = 'StateHomeError';
    this.remedy = remedy;
    this.variables = variables;
    Object.defineProperty(this, BRAND, { value: true });
  }

  /** True for a StateHomeError from any copy of this package (it is always `refused`, so `codes` may only narrow to that). */
  static override is(value: unknown, ...codes: ContractError['code'][]): value is StateHomeError {
    return ContractError.is(value, ...codes) && (value as unknown as Record<symbol, unknown>)[BRAND] === true;
  }
}
