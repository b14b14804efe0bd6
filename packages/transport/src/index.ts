export { addressOf, endpointOf, type LoopbackAddress } from './address.js';
export {
  connect,
  settledInspection,
  type ConnectOptions,
  type Connection,
  type Reply,
  type StreamReply,
} from './client.js';
export { connectOrStart, type ConnectOrStartOptions, type StartedProcess, type WaitingOn } from './connect-or-start.js';
export {
  askHandOver,
  handOverReasonProblem,
  type HandOverAccepted,
  type HandOverDecision,
  type HandOverPending,
  type HandOverRequest,
} from './hand-over.js';
export {
  DEFAULT_LIMITS,
  ownerHandler,
  readBody,
  type OwnerHandlerOptions,
  type OwnerRoutes,
  type OwnerStatusBody,
  type TransportLimits,
} from './handler.js';
export { serveOwner, type ServeOptions, type ServeOutcome, type Serving } from './owner.js';
// What a caller of this package needs from the layers below, so that a team installs this one package.
export {
  ContractError,
  type ContractErrorCode,
  type Ownership,
  type OwnershipLease,
  type ProvedDeadRecovery,
} from '@leasehold/contracts';
export { fileOwnership, resolveWorkspace } from '@leasehold/coordination';
export { type PrivateFilesHooks } from '@leasehold/private-files';
