import {
  ContractError,
  REGISTRY_FOLDER_ENTRIES,
  stateHomeLayout,
  type Backend,
  type FileSystemAllowance,
} from '@leasehold/contracts';
import { PrivateFiles, isSystemError, setupErrnoMeaning, type PrivateFilesHooks } from '@leasehold/private-files';
import { assertFileSystem, judgeFileSystem, type FileSystemJudgement } from './file-system-check.js';
import { checkFormat, recordedBackend } from './registry-view.js';

/** `error` as a `refused` naming the state home and the remedy, when it is a setup error; else `error` itself. */
function setupRefusal(error: unknown, stateHome: string, doing: string): unknown {
  if (ContractError.is(error) || !isSystemError(error)) return error;
  // Other errors (EIO, ENOSPC) are the disk's, and stay as they are.
  const meaning = setupErrnoMeaning(error);
  if (meaning === undefined) return error;
  return new ContractError(
    'refused',
    `${stateHome}: cannot ${doing} the state home: ${error.path ?? stateHome}: ${meaning} (${error.code}); make every level above it a folder this user can enter and write, or choose another state home`,
    { cause: error, path: stateHome },
  );
}

/**
 * Whether the state home is there, proved safe, on a file system whose guarantees are proven or
 * that its format document (or `own`, an allowance about to be recorded) allows.
 * @throws ContractError `refused` for an unsafe or unreachable one, or one on a file system not allowed.
 */
export function reachStateHome(home: PrivateFiles, stateHome: string, own?: FileSystemAllowance): boolean {
  const there = stateHomeThere(home, stateHome, 'reach');
  if (there) assertFileSystem(stateHome, stateHome, 'state home', allowancesOf(home, stateHome, there, own));
  return there;
}

/**
 * Whether the state home is there, proved safe (its file system not judged).
 * @throws ContractError `refused` for an unsafe one, or one this user cannot `doing` (reach, create).
 */
function stateHomeThere(home: PrivateFiles, stateHome: string, doing: string): boolean {
  try {
    return home.directory(stateHome);
  } catch (error) {
    throw setupRefusal(error, stateHome, doing);
  }
}

/**
 * What allows a state home's file system, asked for only on one not proven: `own` (an allowance
 * about to be recorded) and, once the state home is `there`, the one its format document records.
 */
export function allowancesOf(
  home: PrivateFiles,
  stateHome: string,
  there: boolean,
  own: FileSystemAllowance | undefined,
): () => readonly (FileSystemAllowance | undefined)[] {
  return () => [own, there ? recordedAllowance(home, stateHome) : undefined];
}

/**
 * The file system `stateHome` is on (where it will be made, when it is not there yet) and whether
 * its format document allows that one. Reads, never writes.
 * @throws ContractError `refused` for an unsafe or unreachable state home, or an invalid format document.
 */
export function stateHomeFileSystem(stateHome: string): FileSystemJudgement {
  const layout = stateHomeLayout(stateHome);
  const home = new PrivateFiles(layout.stateHome);
  const there = stateHomeThere(home, layout.stateHome, 'reach');
  return judgeFileSystem(layout.stateHome, allowancesOf(home, layout.stateHome, there, undefined));
}

/** The allowance the state home's format document records, if any. */
function recordedAllowance(home: PrivateFiles, stateHome: string): FileSystemAllowance | undefined {
  const layout = stateHomeLayout(stateHome);
  const format = home.read(layout.registryFormat);
  return format === undefined ? undefined : checkFormat(format, stateHome, layout.registryFormat).allowedFileSystem;
}

/**
 * The backend `stateHome` records in its format document (the file backend when
 * the document names none), or undefined before any transaction wrote one. Takes
 * no lock and writes nothing: this is how a tool picks the backend to open a state home with.
 * @throws ContractError `refused` (a path not absolute and normalised, an unsafe state home or
 * file, an invalid format document), `conflict` (a file changed while read).
 */
export function backendOf(stateHome: string, hooks?: PrivateFilesHooks): Backend | undefined {
  const layout = stateHomeLayout(stateHome);
  const options = hooks === undefined ? {} : { hooks };
  reachStateHome(new PrivateFiles(layout.stateHome, options), layout.stateHome);
  const files = new PrivateFiles(layout.namespace, options);
  files.entries(layout.registry, REGISTRY_FOLDER_ENTRIES);
  const format = files.read(layout.registryFormat);
  return format === undefined ? undefined : recordedBackend(format, layout.stateHome, layout.registryFormat);
}

/**
 * Makes the state home (0700) and its missing ancestors (0700 too). The
 * ancestors lie outside Leasehold's private root; the state home itself is
 * checked like every private folder, and so is its file system (see `reachStateHome`): `own` is an
 * allowance the caller is about to record (`leasehold init --allow-fs`).
 * @throws ContractError `refused` for an unsafe state home, one on a file system not allowed, or one
 * that cannot be made (a level above it is a file or a dangling link, no permission, a read-only file system).
 */
export function ensureStateHome(stateHome: string, hooks?: PrivateFilesHooks, own?: FileSystemAllowance): void {
  const layout = stateHomeLayout(stateHome);
  const home = new PrivateFiles(layout.stateHome, hooks === undefined ? {} : { hooks });
  const there = stateHomeThere(home, layout.stateHome, 'create');
  // Before anything is made: one not there yet is judged where it will be.
  assertFileSystem(layout.stateHome, layout.stateHome, 'state home', allowancesOf(home, layout.stateHome, there, own));
  if (there) return;
  try {
    home.directory(layout.stateHome, true);
  } catch (error) {
    throw setupRefusal(error, layout.stateHome, 'create');
  }
}
