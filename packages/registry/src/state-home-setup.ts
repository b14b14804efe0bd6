import { ContractError, REGISTRY_FOLDER_ENTRIES, stateHomeLayout, type Backend } from '@leasehold/contracts';
import { PrivateFiles, isSystemError, setupErrnoMeaning, type PrivateFilesHooks } from '@leasehold/private-files';
import { recordedBackend } from './registry-view.js';

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

/** Whether the state home is there, proved safe. @throws ContractError `refused` for an unsafe or unreachable one. */
export function reachStateHome(home: PrivateFiles, stateHome: string): boolean {
  try {
    return home.directory(stateHome);
  } catch (error) {
    throw setupRefusal(error, stateHome, 'reach');
  }
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
 * checked like every private folder.
 * @throws ContractError `refused` for an unsafe state home, or one that cannot be made
 * (a level above it is a file or a dangling link, no permission, a read-only file system).
 */
export function ensureStateHome(stateHome: string, hooks?: PrivateFilesHooks): void {
  const layout = stateHomeLayout(stateHome);
  try {
    new PrivateFiles(layout.stateHome, hooks === undefined ? {} : { hooks }).directory(layout.stateHome, true);
  } catch (error) {
    throw setupRefusal(error, layout.stateHome, 'create');
  }
}
