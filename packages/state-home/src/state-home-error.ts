import { ContractError, type ContractErrorOptions } from '@leasehold/contracts';

/**
 * The kind of remedy that fits a state home this host cannot open as it records, for a caller that
 * words it its own way (the error's `remedy` words it already):
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

/** The words of each kind of remedy, about `variables`: what a person runs (the `leasehold` command prints it as it is). */
function remedyOf(kind: StateHomeRemedy, variables: readonly string[]): string {
  switch (kind) {
    case 'set-both-or-neither':
      return `export both ${variables.join(' and ')}, or unset both`;
    case 'set-also':
      return `export ${variables.join(' and ')} as well`;
    case 'readable-file':
      return `point ${variables.join(' and ')} at a readable PEM file`;
    case 'install-etcd':
      // The command depends on @leasehold/etcd (its bundle loads it from its own folder), so only a broken or pruned install lacks it.
      return 'install @leasehold/etcd beside @leasehold/state-home (for the leasehold command: install @leasehold/cli again, with its dependencies, @leasehold/etcd among them)';
  }
}

/**
 * A `refused` ContractError about this host's setup, not about a file in the state home: what is
 * missing or half set, with its `remedy` in words, the kind of remedy that fits (`remedyKind`) and
 * the environment variables it is about. Retrying does not help; the remedy does. The message names
 * variables and paths, never a value read from them.
 */
export class StateHomeError extends ContractError {
  /** The kind of remedy that fits, for a caller that words it its own way. */
  readonly remedyKind: StateHomeRemedy;
  /** The environment variables the remedy is about (none for `install-etcd`). */
  readonly variables: readonly string[];
  declare readonly [BRAND]: true;

  constructor(
    message: string,
    remedyKind: StateHomeRemedy,
    variables: readonly string[],
    options?: Omit<ContractErrorOptions, 'remedy'>,
  ) {
    super('refused', message, { ...options, remedy: remedyOf(remedyKind, variables) });
    this.name = 'StateHomeError';
    this.remedyKind = remedyKind;
    this.variables = variables;
    Object.defineProperty(this, BRAND, { value: true });
  }

  /** True for a StateHomeError from any copy of this package (it is always `refused`, so `codes` may only narrow to that). */
  static override is(value: unknown, ...codes: ContractError['code'][]): value is StateHomeError {
    return ContractError.is(value, ...codes) && (value as unknown as Record<symbol, unknown>)[BRAND] === true;
  }
}
