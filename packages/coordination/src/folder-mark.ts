import { existsSync } from 'node:fs';
import {
  ContractError,
  encode,
  folderMarkPlaces,
  placeOptions,
  recoverRemedy,
  type FolderMark,
  type MarkedOwnership,
  type Reservation,
  type WorkspacePlaces,
} from '@leasehold/contracts';
import {
  describeHolder,
  describeUser,
  ownerStatus,
  type FileSnapshot,
  type MarkSnapshot,
} from '@leasehold/private-files';
import { FILE_BYTES, bounded, documentOf, type MarkDocument } from './service-state.js';
import type { Workspace } from './workspace.js';

// The folder's own fence (SPEC 5.1a): a state home is a namespace, not the boundary of "one owner
// per folder". Acquire publishes the mark exclusively after its row and before any service file;
// release removes it after them and before the row; a mark that names another ownership refuses
// the folder and every folder below it, whatever state home the acquirer uses.

/** The mark this ownership publishes in its folder (no secret). */
export function markBytes(
  { places, backend }: Workspace,
  owner: Pick<Reservation, 'root' | 'stateHome' | 'epoch' | 'pid' | 'host' | 'processStart'>,
): Uint8Array {
  const { root, stateHome, epoch, pid, host, processStart } = owner;
  const mark: FolderMark = {
    schema: 'leasehold.folder-mark/1',
    root,
    stateHome,
    backend: backend.kind,
    ...(backend.kind === 'etcd' ? { prefix: backend.prefix } : {}),
    epoch,
    pid,
    host,
    ...(processStart === undefined ? {} : { processStart }),
  };
  return bounded(encode(mark), FILE_BYTES.mark, places.mark);
}

/**
 * Whether `mark` names an ownership this state home's backend holds: one of this state home's
 * files, or, on etcd, one of the cluster's under the same prefix, whatever host's state home made
 * it (a folder shared between hosts: the etcd fence is the one that excludes them).
 */
export function markedHere(mark: FolderMark, { places, backend }: Pick<Workspace, 'places' | 'backend'>): boolean {
  if (backend.kind === 'etcd') return mark.backend === 'etcd' && mark.prefix === backend.prefix;
  return mark.backend === 'files' && mark.stateHome === places.stateHome;
}

function markDocument(path: string, snapshot: MarkSnapshot): MarkDocument {
  return { snapshot, value: documentOf('mark', path, snapshot)!.value as FolderMark };
}

/**
 * The mark at `path`, strictly decoded, with its file's owner; undefined when absent.
 * @throws ContractError `refused` (unsafe or malformed), `conflict` (changing while read).
 */
function readMark({ marks }: Workspace, path: string): MarkDocument | undefined {
  const snapshot = marks.read(path, FILE_BYTES.mark);
  return snapshot === undefined ? undefined : markDocument(path, snapshot);
}

/**
 * The nearest mark, on the folder itself or on a folder above it, that names an ownership other
 * than one of this state home's (whose own rows refuse overlaps both ways); undefined when none.
 * @throws ContractError `refused` for a mark that cannot be read safely, `conflict` (changing while read).
 */
export function foreignMark(
  workspace: Workspace,
  own: MarkDocument | undefined = readMark(workspace, workspace.places.mark),
): { readonly root: string; readonly mark: MarkDocument } | undefined {
  const { places, marks } = workspace;
  if (own !== undefined && !markedHere(own.value, workspace)) return { root: places.root, mark: own };
  const above = marks.markedAncestor(places.root, FILE_BYTES.mark);
  if (above === undefined) return undefined;
  const path = folderMarkPlaces(above.root).mark;
  const mark = markDocument(path, above.mark);
  return markedHere(mark.value, workspace) ? undefined : { root: above.root, mark };
}

/** The ownership a mark names, for a reader (never a secret: the mark has none). */
export function markedOwnership(
  places: WorkspacePlaces,
  root: string,
  { value, snapshot }: MarkDocument,
): MarkedOwnership {
  const { stateHome, backend, epoch, pid, host, processStart } = value;
  return {
    root,
    stateHome,
    backend,
    epoch,
    pid,
    host,
    process: ownerStatus(pid, host, processStart),
    recoverIn: recoveringStateHome(value, places),
    uid: snapshot.uid,
    user: describeUser(snapshot.uid),
  };
}

/** The state home whose recovery removes a mark: the one it names, or, once that one is gone, this one. */
export function recoveringStateHome(mark: FolderMark, places: WorkspacePlaces): string {
  return existsSync(mark.stateHome) ? mark.stateHome : places.stateHome;
}

/**
 * Refuses an acquire of the folder when its mark, or one above it, names another ownership than
 * this state home's (whose own refusals, in its registry transaction, come after).
 * @throws ContractError `conflict`/`quarantine` (`markRefusal`), `refused` for a mark that cannot be read safely.
 */
export function refuseForeignMarks(workspace: Workspace): void {
  const foreign = foreignMark(workspace);
  if (foreign !== undefined) throw markRefusal(workspace, foreign.root, foreign.mark);
}

/**
 * Publishes an ownership's mark, exclusively. A mark already there, published by another acquire
 * that won the race, or left by a crash, is refused in words.
 * @throws ContractError as `markRefusal` for a mark already there; `refused` for a folder where it cannot be written.
 */
export function publishMark(workspace: Workspace, bytes: Uint8Array): FileSnapshot {
  const { marks, places } = workspace;
  try {
    return marks.create(places.mark, bytes, FILE_BYTES.mark);
  } catch (error) {
    if (!ContractError.is(error, 'conflict')) throw error;
    const there = readMark(workspace, places.mark);
    if (there === undefined) throw error;
    throw markRefusal(workspace, places.root, there);
  }
}

/**
 * The refusal of an acquire of `places.root` that meets the mark of `markedRoot` (the folder
 * itself, or one above it): `conflict` while its holder lives or cannot be told, `quarantine` once
 * it is proved gone, each naming the holder, the state home, the user, and the way out.
 */
function markRefusal(
  workspace: Pick<Workspace, 'places' | 'backend'>,
  markedRoot: string,
  { value: mark, snapshot: { uid } }: MarkDocument,
): ContractError {
  const { places } = workspace;
  const status = ownerStatus(mark.pid, mark.host, mark.processStart);
  const through = markedHere(mark, workspace)
    ? 'this state home'
    : `state home ${mark.stateHome}${mark.backend === 'etcd' ? ' (etcd backend)' : ''}`;
  const user = uid === process.geteuid?.() ? '' : `, as ${describeUser(uid)}`;
  const folder = markedRoot === places.root ? 'the folder' : `${places.root} is inside ${markedRoot}, which`;
  const message = `${folder} is owned by ${describeHolder(mark, status)} through ${through}${user} (${markedRoot}/.leasehold/owner.json)`;
  const asUser = user === '' ? '' : `; run it as ${describeUser(uid)}, whose mark it is`;
  const remedy =
    status === 'live'
      ? `it is in use: stop that owner with \`leasehold stop ${placeOptions(markedRoot, mark.stateHome)}\`, or wait until it is done${asUser}`
      : `${recoverRemedy(markedRoot, recoveringStateHome(mark, places), status)}${asUser}`;
  return new ContractError(status === 'absent' ? 'quarantine' : 'conflict', message, { path: places.mark, remedy });
}
