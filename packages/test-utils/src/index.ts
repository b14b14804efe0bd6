export { bytesOf, sha256Hex } from './bytes.js';
export {
  connectedClients,
  isMessage,
  messageOf,
  messagesOf,
  serveInTurn,
  type ConnectedClient,
} from './child-messages.js';
export {
  killAndReap,
  spawnChild,
  spawnCommand,
  spawnUnreaped,
  type ChildEnd,
  type SpawnedChild,
  type UnreapedChild,
} from './child-process.js';
export { cleanUp } from './clean-up.js';
export { caughtErrors, codeOf, codeOfAsync, contractErrorOf } from './contract-codes.js';
export { countsOf } from './counts.js';
export { killDetached, loggedProcesses, logLines, type LoggedProcess } from './detached-processes.js';
export { loopbackEndpoint } from './endpoints.js';
export { firstToCreate } from './first-to-create.js';
export { makeEtcdCertificates, type EtcdCertificates } from './etcd-certificates.js';
export { etcdAvailable } from './etcd-tools.js';
export {
  enableEtcdAuth,
  etcdctl,
  etcdVersion,
  startEtcd,
  type EtcdCluster,
  type EtcdMember,
  type EtcdUser,
} from './etcd.js';
export {
  sharedFixturePath,
  spawnSharedFixture,
  type CheckoutHolderPlan,
  type CrasherPlan,
  type CrasherStep,
  type SharedFixturePlans,
} from './fixtures.js';
export { treeOf, type TreeEntry, type TreeOptions } from './file-tree.js';
export { isMissing, jsonOf, modeOf, namesIn, pathExists, replaceFile } from './files-by-hand.js';
export { fencesOf, handPlaces, serviceFences, type HandPlaces, type StateReader } from './hand-places.js';
export {
  createFolderSteps,
  createSteps,
  lockCreateSteps,
  lockRemoveSteps,
  markCreateSteps,
  markRemoveSteps,
  ownerFilesSteps,
  releaseServiceSteps,
  removeSteps,
  replaceSteps,
  shownStep,
  type ShownPublish,
} from './shown-steps.js';
export { mountOn, mountsAllowed } from './mounts.js';
export { killUnreaped, stopProcess, untilGone } from './stopped-processes.js';
export { spawnFixture, spawnPlanned, type FixtureModules } from './spawn-fixture.js';
export { processStartWith } from './process-starts.js';
export { rewriteJson } from './rewrite-json.js';
export { listingOutsideStaging, stateListing, type ListedEntry } from './state-listing.js';
export { readLineSync } from './stdin-lines.js';
export { makeTemporaryFolder, makeWorkspace } from './temporary-folders.js';
export { makePlace, type TestPlace } from './test-place.js';
export { CRASH_STATE_CAP, allCrashStates, crashStates, type CrashPoint, type CrashStates } from './power-loss/model.js';
export { contentKey, nodeKey, type Tree, type TreeNode } from './power-loss/tree.js';
export { baseTree } from './power-loss/base-tree.js';
export { materialise } from './power-loss/materialise.js';
export {
  PROVED_FSYNCS,
  droppedTogether,
  fsyncBounds,
  provedCounts,
  type PowerLossProtocol,
  type ProvedFsyncs,
} from './power-loss/proved.js';
export { makeBaseTree, shownTree, type ShownTree } from './power-loss/shown-tree.js';
export {
  decodeTrace,
  encodeTrace,
  recordTrace,
  type TraceAction,
  type TraceHooks,
  type TraceOp,
  type TracedStep,
  type TraceRecorder,
} from './power-loss/trace.js';
