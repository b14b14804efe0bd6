import type { ContractErrorCode } from '@leasehold/contracts';

/** One line a person can act on, for each error code. */
export const REMEDIES: Record<ContractErrorCode, string> = {
  refused: 'a file or an input breaks a rule; run `leasehold doctor` to see which and how to fix it',
  conflict: 'another owner, config or a newer state is in the way; check `leasehold status` and `leasehold list`',
  capacity: 'the registry is full; stop or recover unused workspaces (`leasehold list`)',
  quarantine: 'a crashed or unreachable owner blocks this; check `leasehold status`, then `leasehold recover` once it is gone',
  unavailable: 'nothing is serving there right now; start it with `leasehold serve`',
  'consumed-grant': 'this recovery was already used; run `leasehold recover` again to review the current state',
  busy: 'another leasehold command holds the registry; try again in a moment',
};
