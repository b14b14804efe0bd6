import { ContractError, type Ownership } from '@leasehold/contracts';

/**
 * The `ownership` a call was given. This package picks no backend itself: a daemon gets its
 * ownership from `openStateHome` of @leasehold/state-home, which follows the backend the state home
 * records (or `fileOwnership({ stateHome })` when it wants the file backend whatever is recorded).
 * @throws ContractError `refused` naming the option when there is none (a caller without types).
 */
export function givenOwnership(call: string, ownership: Ownership | undefined): Ownership {
  if (ownership === undefined || ownership === null) {
    throw new ContractError(
      'refused',
      `${call}: the option \`ownership\` is required: @leasehold/transport picks no backend itself`,
      {
        remedy:
          "pass the state home's ownership: `(await openStateHome(stateHome)).ownership` of @leasehold/state-home, or `fileOwnership({ stateHome })` for the file backend",
      },
    );
  }
  return ownership;
}
