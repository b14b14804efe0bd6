export { openStateHome, type OpenBackend, type OpenOptions } from './open-state-home.js';
export { recordBackend } from './record-backend.js';
export { StateHomeError, type StateHomeRemedy } from './state-home-error.js';
// What a caller meets in the signatures above, from the layers below, so that one install is enough.
export { ContractError, type Backend, type ContractErrorCode, type Ownership, type Recovery } from '@leasehold/contracts';
export { defaultStateHome } from '@leasehold/coordination';
