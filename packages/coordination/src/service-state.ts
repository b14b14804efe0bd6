import { basename } from 'node:path';
import {
  ContractError,
  DOCUMENT_BYTES,
  PATHS_DOCUMENT_BYTES,
  checkoutLockSchema,
  companionSchema,
  folderMarkSchema,
  DecodedFiles,
  decodeBytes,
  encode,
  localCapabilitySchema,
  ownerConfigSchema,
  ownerLockSchema,
  registrationSchema,
  serviceFormatSchema,
  type CheckoutLock,
  type Companion,
  type FolderMark,
  type LocalCapability,
  type OwnerConfig,
  type OwnerLock,
  type Registration,
  type Reservation,
  type ServiceFormat,
  NAMESPACE_ENTRIES,
  PRIVATE_ROOT_ENTRIES,
  SERVICE_ENTRIES,
  type WorkspacePlaces,
} from '@leasehold/contracts';
import type { FileSnapshot, MarkSnapshot, PrivateFiles } from '@leasehold/private-files';
import type { z } from 'zod';
import type { Workspace } from './workspace.js';

/** The files of one workspace that Leasehold reads; each key is also the name of its path in `WorkspacePlaces`. */
export const SERVICE_FILES = [
  'format',
  'config',
  'hostConfig',
  'registration',
  'ownerLock',
  'capability',
  'companion',
  'checkoutLock',
] as const;
export type ServiceFile = (typeof SERVICE_FILES)[number];

/**
 * Every file that fences a workspace from a new owner: its service files, and the folder's own
 * mark in the workspace itself (SPEC 5.1a), which holds the folder whatever the state home.
 */
export const FENCE_FILES = [...SERVICE_FILES, 'mark'] as const;
export type FenceFile = (typeof FENCE_FILES)[number];

/** The files that hold `key`: the state home's private files, or the workspaces' marks for the mark. */
export function filesOf(
  workspace: Pick<Workspace, 'files' | 'marks'>,
  key: FenceFile,
): Pick<PrivateFiles, 'read' | 'assert' | 'unchanged' | 'create' | 'remove'> {
  return key === 'mark' ? workspace.marks : workspace.files;
}

/** The reservation part of a registration: what the registry row must equal. */
export function reservationOf(registration: Registration): Reservation {
  const { root, stateHome, configIdentity, endpoint, epoch, pid, host, processStart, ownerToken } = registration;
  // Frozen, so that its canonical text, compared on every assert, is made once.
  return Object.freeze({ root, stateHome, configIdentity, endpoint, epoch, pid, host, processStart, ownerToken });
}

/** Two reservations are the same when their canonical encodings are. */
export function sameReservation(a: Reservation | undefined, b: Reservation | undefined): boolean {
  if (a === undefined || b === undefined || a === b) return a === b;
  return Buffer.from(encode(a)).equals(Buffer.from(encode(b)));
}

/**
 * For a change to the service folder that a later change in the same call
 * fsyncs with it (private-files `PublishOptions`): acquire publishes
 * `owner.lock`, then the capability, which fsyncs the folder; a release (and
 * a recovery) writes the registration `stopped` and removes the capability,
 * then removes `owner.lock`, which fsyncs it. Before that fsync a power loss
 * may keep any subset of these changes, and each subset is still fenced (by
 * the row, the checkout lock or owner.lock) and recovered; once the call
 * returned, all are durable. The power-loss exploration of the recovery tests
 * checks every such state, and shows each fsync left in a release is needed.
 * The capability's own folder fsync in acquire stays: skipping it too is
 * sound for an acquire over a stopped registration, but in a fresh state
 * home it leaves more states at one crash point than the exploration
 * enumerates, so nothing proves it.
 */
export const SYNCED_BY_LATER_CHANGE = { syncFolder: false } as const;

/** The byte bound of each file, the one table every read, write and assertion uses. */
export const FILE_BYTES: Readonly<Record<FenceFile, number>> = {
  format: PATHS_DOCUMENT_BYTES,
  config: DOCUMENT_BYTES,
  hostConfig: PATHS_DOCUMENT_BYTES,
  registration: PATHS_DOCUMENT_BYTES,
  ownerLock: DOCUMENT_BYTES,
  capability: DOCUMENT_BYTES,
  companion: DOCUMENT_BYTES,
  checkoutLock: DOCUMENT_BYTES,
  mark: PATHS_DOCUMENT_BYTES,
};

/** The schema of each file (`host-config.json` is the service's own: read, never decoded). */
export const SERVICE_SCHEMAS = {
  format: serviceFormatSchema,
  config: ownerConfigSchema,
  hostConfig: undefined,
  registration: registrationSchema,
  ownerLock: ownerLockSchema,
  capability: localCapabilitySchema,
  companion: companionSchema,
  checkoutLock: checkoutLockSchema,
  mark: folderMarkSchema,
} as const satisfies Readonly<Record<FenceFile, z.ZodType | undefined>>;

/** Snapshots of some service files, as a writer left them; `undefined` means "must be absent". */
export type FileSnapshots = Partial<Record<FenceFile, FileSnapshot | undefined>>;

/** A file as read: its snapshot and its decoded value. */
export interface Document<T> {
  readonly snapshot: FileSnapshot;
  readonly value: T;
}

/** A folder's mark as read: its snapshot says whose file it is. */
export interface MarkDocument extends Document<FolderMark> {
  readonly snapshot: MarkSnapshot;
}

/**
 * Every file of one workspace's selected state, each decoded strictly, read
 * as a whole. Cross-file rules are not checked here (see
 * `checkServiceState`): recovery reads states that break them.
 */
export interface ServiceState {
  readonly service: boolean;
  readonly format: Document<ServiceFormat> | undefined;
  readonly config: Document<OwnerConfig> | undefined;
  readonly hostConfig: FileSnapshot | undefined;
  readonly registration: Document<Registration> | undefined;
  readonly ownerLock: Document<OwnerLock> | undefined;
  readonly capability: Document<LocalCapability> | undefined;
  readonly companion: Document<Companion> | undefined;
  readonly checkoutLock: Document<CheckoutLock> | undefined;
  /** The folder's own mark, whichever state home it names (a mark of another is no part of this state). */
  readonly mark: MarkDocument | undefined;
}

/** The service files Leasehold decodes (`host-config.json` is the service's own: read, never decoded). */
export type DecodedFile = Exclude<FenceFile, 'hostConfig'>;

/** One file of the workspace, strictly decoded, or undefined when it (or its folder) is absent. */
export function readDocument<Key extends DecodedFile>(
  { files, places }: Workspace,
  key: Key,
): Document<z.output<(typeof SERVICE_SCHEMAS)[Key]>> | undefined {
  return readServiceFile(files, key, places[key]);
}

/**
 * The service file `key` at `path` (a workspace's, or one found on disk below a private root),
 * read with its byte bound and strictly decoded (`host-config.json`, the service's own, as its
 * bytes); undefined when absent. For diagnosis tools, which read every file on its own.
 * @throws ContractError `refused` (unsafe, oversized or malformed), `conflict` (changing while read).
 */
export function readServiceFile(files: PrivateFiles, key: 'hostConfig', path: string): Document<Uint8Array> | undefined;
export function readServiceFile<Key extends DecodedFile>(
  files: PrivateFiles,
  key: Key,
  path: string,
): Document<z.output<(typeof SERVICE_SCHEMAS)[Key]>> | undefined;
export function readServiceFile(files: PrivateFiles, key: ServiceFile, path: string): Document<unknown> | undefined;
export function readServiceFile(files: PrivateFiles, key: ServiceFile, path: string): Document<unknown> | undefined {
  return documentOf(key, path, files.read(path, FILE_BYTES[key]));
}

/**
 * A file's snapshot strictly decoded (`host-config.json`, the service's own, as its bytes); undefined when absent.
 * @throws ContractError `refused` (malformed).
 */
export function documentOf(
  key: FenceFile,
  path: string,
  snapshot: FileSnapshot | undefined,
): Document<unknown> | undefined {
  if (snapshot === undefined) return undefined;
  const schema = SERVICE_SCHEMAS[key];
  if (schema === undefined) return { snapshot, value: snapshot.bytes };
  return {
    snapshot,
    value: decodedDocuments.get(`${key}:${path}`, snapshot.identity, () =>
      decodeBytes(schema, snapshot.bytes, FILE_BYTES[key], path),
    ),
  };
}

// Every inspect() and every owner's re-assertion reads a workspace's files, which rarely change:
// each is decoded once per content. Enough for the six documents of each of a few dozen workspaces
// that one process (a client, a CI host's supervisor) reads in turn.
const decodedDocuments = new DecodedFiles<unknown>(256);

/** Whether `path`'s name is among `names`, the listing of its folder. */
function listed(names: readonly string[], path: string): boolean {
  return names.includes(basename(path));
}

/**
 * Reads the namespace, the private root and the service folder as `readServiceState` does (only
 * allowed names, every file safe and within its bound) without decoding a file: what an owner
 * compares with the snapshots it wrote, decoding (`documentOf`) only a file that differs.
 * @throws ContractError `refused` (unexpected entry, unsafe file), `conflict` (a file changed while read).
 */
export function readServiceSnapshots({ files, marks, places }: Workspace): {
  service: boolean;
  snapshots: Record<FenceFile, FileSnapshot | undefined> & { mark: MarkSnapshot | undefined };
} {
  files.entries(places.namespace, NAMESPACE_ENTRIES);
  // A name a folder's listing does not show is absent, as exactly as an lstat that finds nothing
  // would say: only the files listed are looked up and read (each read proves what it opened).
  const rootNames = files.entries(places.privateRoot, PRIVATE_ROOT_ENTRIES);
  const checkoutLock = listed(rootNames, places.checkoutLock)
    ? files.read(places.checkoutLock, FILE_BYTES.checkoutLock)
    : undefined;
  const service = files.directory(places.service);
  const names = service ? files.entries(places.service, SERVICE_ENTRIES) : [];
  const read = (key: Exclude<ServiceFile, 'checkoutLock'>) =>
    listed(names, places[key]) ? files.read(places[key], FILE_BYTES[key]) : undefined;
  return {
    service,
    snapshots: {
      format: read('format'),
      config: read('config'),
      hostConfig: read('hostConfig'),
      registration: read('registration'),
      ownerLock: read('ownerLock'),
      capability: read('capability'),
      companion: read('companion'),
      checkoutLock,
      mark: marks.read(places.mark, FILE_BYTES.mark),
    },
  };
}

/**
 * Reads the namespace, the private root and the service folder: only allowed
 * names, every file safe and strictly decoded.
 * @throws ContractError `refused` (unexpected entry, unsafe or malformed file), `conflict` (a file changed while read).
 */
export function readServiceState(workspace: Workspace): ServiceState {
  const { places } = workspace;
  const { service, snapshots } = readServiceSnapshots(workspace);
  const decoded = <Key extends DecodedFile>(key: Key) =>
    documentOf(key, places[key], snapshots[key]) as Document<z.output<(typeof SERVICE_SCHEMAS)[Key]>> | undefined;
  return {
    service,
    format: decoded('format'),
    config: decoded('config'),
    hostConfig: snapshots.hostConfig,
    registration: decoded('registration'),
    ownerLock: decoded('ownerLock'),
    capability: decoded('capability'),
    companion: decoded('companion'),
    checkoutLock: decoded('checkoutLock'),
    // The snapshot is the mark's own read (a MarkSnapshot), decoded.
    mark: decoded('mark') as MarkDocument | undefined,
  };
}

/** The snapshot of each service file in a state just read. */
export function snapshotsOf(state: ServiceState): Record<FenceFile, FileSnapshot | undefined> {
  return {
    format: state.format?.snapshot,
    config: state.config?.snapshot,
    hostConfig: state.hostConfig,
    registration: state.registration?.snapshot,
    ownerLock: state.ownerLock?.snapshot,
    capability: state.capability?.snapshot,
    companion: state.companion?.snapshot,
    checkoutLock: state.checkoutLock?.snapshot,
    mark: state.mark?.snapshot,
  };
}

/**
 * The one "these files are still as I wrote them" check: each file named in
 * `expected` is exactly its snapshot (or absent for `undefined`), read with
 * its own bound.
 * @throws ContractError `conflict` (a file changed), `refused` (a file became unsafe).
 */
export function assertFiles(workspace: Workspace, expected: FileSnapshots): void {
  for (const key of FENCE_FILES) {
    if (key in expected) filesOf(workspace, key).assert(workspace.places[key], expected[key], FILE_BYTES[key]);
  }
}

/**
 * `bytes`, proven within `maxBytes`: every document is checked before the
 * first write of a step, so an oversized one changes nothing.
 * @throws ContractError `refused`.
 */
export function bounded(bytes: Uint8Array, maxBytes: number, path: string): Uint8Array {
  if (bytes.byteLength > maxBytes) throw new ContractError('refused', `${path}: over ${maxBytes} bytes`);
  return bytes;
}

/** The config's endpoint admits `bound`: equal, or the config asks for port 0 on the same host. */
export function endpointAdmits(configured: string, bound: string): boolean {
  if (configured === bound) return true;
  return configured.endsWith(':0') && bound.startsWith(configured.slice(0, -1)) && !bound.endsWith(':0');
}

function refuse(path: string, problem: string): never {
  throw new ContractError('refused', `${path}: ${problem}`);
}

/**
 * The selected-state rules (the README's "The selected state"): valid only as a whole.
 * @throws ContractError `refused` naming the file and the broken rule.
 */
export function checkServiceState(state: ServiceState, places: WorkspacePlaces): void {
  const { format, config, registration } = state;
  if (state.service) {
    if (format === undefined) refuse(places.format, 'missing from the service folder');
    if (config === undefined) refuse(places.config, 'missing from the service folder');
    if (format.value.root !== places.root) refuse(places.format, 'names another workspace root');
    if (format.value.stateHome !== places.stateHome) refuse(places.format, 'names another state home');
    if (format.value.configIdentity !== config.snapshot.identity)
      refuse(places.config, 'is not the config format.json names');
    if (state.hostConfig !== undefined && state.hostConfig.identity !== config.value.policyIdentity) {
      refuse(places.hostConfig, 'is not the policy config.json names');
    }
  }
  if (registration !== undefined) checkRegistration(state, registration.value, places);
  if (registration === undefined || registration.value.phase === 'stopped') checkNoOwner(state, places);
  else checkOwner(state, registration.value, places);
}

function checkRegistration(state: ServiceState, registration: Registration, places: WorkspacePlaces): void {
  const path = places.registration;
  if (registration.root !== places.root) refuse(path, 'names another workspace root');
  if (registration.stateHome !== places.stateHome) refuse(path, 'names another state home');
  if (registration.configIdentity !== state.format?.value.configIdentity) refuse(path, 'names another config');
  if (!endpointAdmits(state.config!.value.endpoint, registration.endpoint))
    refuse(path, "endpoint is not the config's");
}

function checkOwner(state: ServiceState, registration: Registration, places: WorkspacePlaces): void {
  const { ownerLock, capability, checkoutLock } = state;
  if (ownerLock === undefined) refuse(places.ownerLock, 'missing under a live registration');
  if (capability === undefined) refuse(places.capability, 'missing under a live registration');
  if (checkoutLock === undefined) refuse(places.checkoutLock, 'missing under a live registration');
  const owner = ownerLock.value;
  if (
    owner.epoch !== registration.epoch ||
    owner.token !== registration.ownerToken ||
    owner.pid !== registration.pid ||
    owner.host !== registration.host
  ) {
    refuse(places.ownerLock, 'does not agree with the registration');
  }
  if (capability.value.epoch !== registration.epoch) refuse(places.capability, 'is of another epoch');
  const companion = state.companion?.value;
  if (companion !== undefined && (companion.epoch !== registration.epoch || companion.host !== registration.host)) {
    refuse(places.companion, 'does not agree with the registration');
  }
  const checkout = checkoutLock.value;
  if (
    checkout.token !== registration.checkoutToken ||
    checkout.pid !== registration.pid ||
    checkout.host !== registration.host ||
    checkout.processStart !== registration.processStart
  ) {
    refuse(places.checkoutLock, 'does not agree with the registration');
  }
}

function checkNoOwner(state: ServiceState, places: WorkspacePlaces): void {
  if (state.ownerLock !== undefined) refuse(places.ownerLock, 'present without a live registration');
  if (state.capability !== undefined) refuse(places.capability, 'present without a live registration');
  if (state.companion !== undefined) refuse(places.companion, 'present without a live registration');
  const stopped = state.registration?.value;
  if (stopped !== undefined && state.checkoutLock?.value.token === stopped.checkoutToken) {
    refuse(places.checkoutLock, 'still carries the stopped registration');
  }
}
