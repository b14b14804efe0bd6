import { lstatSync, readdirSync, type Stats } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  ContractError,
  DOCUMENT_BYTES,
  JOURNAL_RECORD_NAME,
  NAMESPACE_ENTRIES,
  PRIVATE_ROOT_ENTRIES,
  PRIVATE_ROOT_NAME,
  REGISTRY_BYTES,
  REGISTRY_FOLDER_ENTRIES,
  SERVICE_ENTRIES,
  STAGING_FOLDER,
  decodeBytes,
  fileSystemInWords,
  registryFormatSchema,
  reservationTableSchema,
  stateHomeLayout,
  takeoverMarker,
  workspacePlaces,
  type StateHomeLayout,
} from '@leasehold/contracts';
import {
  PrivateFiles,
  UnsafeEntryError,
  fileOperation,
  entryTypeBreach,
  ownershipBreaches,
  retryingReads,
  type PrivateFilesHooks,
  type StagingEntry,
  type UnsafeEntry,
} from '@leasehold/private-files';
import { Registry, allowanceOf, stateHomeFileSystem } from '@leasehold/registry';
import type { FindingRemedy } from './finding-remedy.js';
import type { Finding } from './findings.js';
import { readWorkspace, workspaceFindings, type DiagnosisContext } from './workspace-findings.js';

export interface DiagnoseOptions {
  /** Handed to every PrivateFiles diagnosis uses (tests only: it never mutates, so the hook is never called). */
  readonly hooks?: PrivateFilesHooks;
}

function lookup(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

function namesIn(folder: string): string[] {
  try {
    return readdirSync(folder).sort();
  } catch {
    return [];
  }
}

function admits(allowed: readonly (string | RegExp)[], name: string): boolean {
  return allowed.some((entry) => (typeof entry === 'string' ? entry === name : entry.test(name)));
}

/** The remedy of a lock whose holder this host cannot tell: a person makes sure that process is gone, then removes the lock. */
function removeOnceGone(path: string, { pid, host }: { readonly pid: number; readonly host: string }): FindingRemedy {
  return { kind: 'remove', path, recursive: false, processGone: { pid, host, runFrom: 'here' } };
}

class Diagnosis implements DiagnosisContext {
  readonly findings: Finding[] = [];
  readonly layout: StateHomeLayout;
  readonly files: PrivateFiles;
  readonly registry: Registry;
  readonly hooks: PrivateFilesHooks | undefined;
  #leftovers: StagingEntry[] = [];

  constructor(stateHome: string, options: DiagnoseOptions) {
    this.layout = stateHomeLayout(stateHome);
    this.hooks = options.hooks;
    const hooks = options.hooks === undefined ? {} : { hooks: options.hooks };
    this.files = new PrivateFiles(this.layout.namespace, hooks);
    this.registry = new Registry(stateHome, hooks);
  }

  get stateHome(): string {
    return this.layout.stateHome;
  }

  add(finding: Finding): void {
    this.findings.push(finding);
  }

  /**
   * Only root may give a file to another user, so a `chown` is the fix only as root; and another
   * user's state home is theirs to use, not to take over.
   */
  private foreignOwnerRemedy(path: string, owner: number, uid: number): FindingRemedy {
    if (path === this.stateHome) return { kind: 'own-state-home', uid: owner };
    return { kind: 'chown', path, uid, asRoot: uid !== 0 };
  }

  /** Links, special files, other owners and loose modes, everywhere under the state home, by the rules private-files reads by. */
  safety(path: string): void {
    const stats = lookup(path);
    if (stats === undefined) return;
    const unsafeType = entryTypeBreach(path, stats);
    for (const breach of unsafeType === undefined ? ownershipBreaches(path, stats) : [unsafeType]) {
      const finding = this.unsafeEntry(breach);
      if (finding !== undefined) this.add(finding);
    }
    if (stats.isDirectory()) for (const name of namesIn(path)) this.safety(join(path, name));
  }

  /** The finding for an entry that breaks a type or ownership rule; undefined for the rules only a read can break (`unreadable`). */
  unsafeEntry(breach: UnsafeEntry): Finding | undefined {
    const { path } = breach;
    switch (breach.rule) {
      case 'symbolic-link':
        return {
          kind: 'symbolic-link',
          path,
          problem: 'a symbolic link: Leasehold never follows one',
          remedy: { kind: 'remove', path, recursive: false },
        };
      case 'special-file':
        return {
          kind: 'special-file',
          path,
          problem: 'not a regular file or folder (a FIFO, socket or device)',
          remedy: { kind: 'remove', path, recursive: false },
        };
      case 'foreign-owner': {
        const uid = process.geteuid?.() ?? -1; // POSIX has it; elsewhere no file is this user's
        return {
          kind: 'foreign-owner',
          path,
          problem: `owned by uid ${breach.uid}, not by you`,
          remedy: this.foreignOwnerRemedy(path, breach.uid, uid),
        };
      }
      case 'open-mode':
        return {
          kind: 'open-mode',
          path,
          problem: `mode ${breach.mode.toString(8)}: group or others have access`,
          remedy: { kind: 'chmod', path, mode: breach.folder ? 0o700 : 0o600 },
        };
      default:
        return undefined;
    }
  }

  /**
   * The finding for a state home (made or where it will be made) on a file system whose guarantees
   * are not proven and that it does not allow; undefined otherwise, or when the state home itself
   * cannot be reached (the walk says why).
   */
  unprovenFileSystem(): Finding | undefined {
    const judged = this.guarded(
      () => stateHomeFileSystem(this.stateHome),
      () => undefined,
    );
    if (judged === undefined || judged.fileSystem.proven || judged.allowed) return undefined;
    return {
      kind: 'unproven-file-system',
      path: this.stateHome,
      problem: `the state home is on ${fileSystemInWords(judged.fileSystem)}, a file system on which Leasehold's guarantees are not proven: every command that uses it is refused`,
      remedy: { kind: 'file-system', stateHome: this.stateHome, allowAs: allowanceOf(judged.fileSystem).name },
    };
  }

  /**
   * Runs a read; a `refused` becomes `onRefused(error)`, a `conflict` that
   * outlasted the retries `onChanging(error)`; anything else is rethrown.
   */
  guarded<T>(
    read: () => T,
    onRefused: (error: ContractError) => void,
    onChanging: (error: ContractError) => void = onRefused,
  ): T | undefined {
    try {
      return retryingReads(read);
    } catch (error) {
      if (ContractError.is(error, 'refused')) onRefused(error);
      else if (ContractError.is(error, 'conflict')) onChanging(error);
      else throw error;
      return undefined;
    }
  }

  /**
   * A finding for a file that cannot be read, unless another finding already
   * says what to do about it: an unsafe entry's own finding when the refusal
   * names a type or ownership rule (one broken after `safety` walked there).
   */
  unreadable(error: ContractError, fallback: string, workspace: string | undefined): void {
    const path = error.path ?? fallback;
    const breach = UnsafeEntryError.breachOf(error);
    if (this.covered(path, breach)) return;
    const where = workspace === undefined ? {} : { workspace };
    const unsafe = breach === undefined ? undefined : this.unsafeEntry(breach);
    if (unsafe !== undefined) {
      this.add({ ...unsafe, ...where });
      return;
    }
    this.add({
      kind: error.code === 'conflict' ? 'changing' : 'unreadable',
      path,
      ...where,
      problem:
        error.code === 'conflict'
          ? `kept changing while read (a writer is at work): ${error.message}`
          : `unreadable: ${error.message}`,
      remedy:
        error.code === 'conflict'
          ? { kind: 'wait-for-writer', stateHome: this.stateHome }
          : { kind: 'repair', path, stateHome: this.stateHome },
    });
  }

  /**
   * Whether a finding already covers `path`: the same path, a stray entry in
   * that folder (a folder refused for a stray is fixed by removing the stray,
   * not the folder and the fences in it), or a dead writer's staging leftover
   * that is a second link of that file (the leftover's removal clears it).
   * A refusal that names another rule than a second link is no leftover's.
   */
  covered(path: string, breach: UnsafeEntry | undefined): boolean {
    if (this.findings.some((finding) => finding.path === path)) return true;
    if (this.findings.some((finding) => finding.kind === 'stray-entry' && dirname(finding.path) === path)) return true;
    if (breach !== undefined && breach.rule !== 'second-link') return false;
    const stats = lookup(path);
    if (stats === undefined || !stats.isFile() || stats.nlink < 2) return false;
    return this.#leftovers.some((entry) => {
      const other = lookup(entry.path);
      return other?.ino === stats.ino && other.dev === stats.dev;
    });
  }

  /**
   * The registry file a refusal is about: its `path`, else (a decoding
   * error names its file only in the message) the first of format.json and
   * roots.json whose bytes do not decode, else the registry folder (a rule
   * across the two files or across entries).
   */
  registryFileOf(error: ContractError): string {
    if (error.path !== undefined) return error.path;
    const { registryFormat, roots } = this.layout;
    const decoders: [string, number, (bytes: Uint8Array) => unknown][] = [
      [
        registryFormat,
        DOCUMENT_BYTES,
        (bytes) => decodeBytes(registryFormatSchema, bytes, DOCUMENT_BYTES, registryFormat),
      ],
      [roots, REGISTRY_BYTES, (bytes) => decodeBytes(reservationTableSchema, bytes, REGISTRY_BYTES, roots)],
    ];
    for (const [path, maxBytes, decode] of decoders) {
      const failed = this.guarded(
        () => {
          const snapshot = this.files.read(path, maxBytes);
          if (snapshot !== undefined) decode(snapshot.bytes);
          return false;
        },
        () => undefined,
      );
      if (failed === undefined) return path;
    }
    return this.layout.registry;
  }

  strays(folder: string, allowed: readonly (string | RegExp)[], workspace?: string): void {
    for (const name of namesIn(folder)) {
      if (admits(allowed, name)) continue;
      const path = join(folder, name);
      this.add({
        kind: 'stray-entry',
        path,
        ...(workspace === undefined ? {} : { workspace }),
        problem: 'a stray entry: Leasehold refuses a folder holding names it does not know',
        remedy: { kind: 'remove', path, recursive: true },
      });
    }
  }

  staging(): void {
    const entries = this.guarded(
      () => this.files.stagingEntries(),
      (error) => this.unreadable(error, this.layout.staging, undefined),
    );
    this.#leftovers = (entries ?? []).filter((entry) => entry.writer !== 'live'); // a live writer's is a write in progress
    for (const entry of this.#leftovers) {
      const gone = entry.writer === 'absent';
      this.add({
        kind: 'staging-leftover',
        path: entry.path,
        problem: gone
          ? 'a staging leftover of a writer that is gone'
          : 'a staging leftover of a writer this host cannot tell; make sure no Leasehold process of another host or container uses it',
        remedy: { kind: 'remove', path: entry.path, recursive: true },
      });
    }
  }

  /**
   * The registry lock, and the take-over markers on its chain, of holders
   * this host cannot tell live or gone: every transaction answers
   * `quarantine` until a person checked. A dead holder's lock or marker is no
   * finding (the next writer takes it over), nor is any marker while no dead
   * holder's lock waits to be taken over: the next writer to hold the lock
   * removes every marker.
   */
  registryLocks(): void {
    const onError = (fallback: string) => (error: ContractError) => this.unreadable(error, fallback, undefined);
    const lock = this.guarded(() => this.registry.readLock(), onError(this.layout.registryLock));
    if (lock === undefined || lock.verdict === 'live') return;
    const blocked = 'every acquire, release and recovery answers quarantine';
    if (lock.verdict === 'ambiguous') {
      this.add({
        kind: 'ambiguous-registry-lock',
        path: lock.path,
        problem: `held by pid ${lock.lock.pid} on ${lock.lock.host}, which this host cannot tell live or gone (for ${lock.lock.root}); ${blocked}`,
        remedy: removeOnceGone(lock.path, lock.lock),
      });
      return;
    }
    const markers = this.guarded(() => this.registry.readMarkers(), onError(this.layout.registry)) ?? [];
    // A writer taking over the dead lock links `takeover-<its token>.lock`; a dead marker is taken over the same way.
    for (let token = lock.lock.token, seen = 0; seen < markers.length; seen += 1) {
      const marker = markers.find((found) => found.path === takeoverMarker(this.layout, token));
      if (marker === undefined || marker.verdict === 'live') return;
      if (marker.verdict === 'ambiguous') {
        this.add({
          kind: 'ambiguous-takeover-marker',
          path: marker.path,
          problem:
            `a take-over of the dead writer's registry lock by pid ${marker.lock.pid} on ${marker.lock.host}, ` +
            `which this host cannot tell live or gone; ${blocked}`,
          remedy: removeOnceGone(marker.path, marker.lock),
        });
        return;
      }
      token = marker.lock.token;
    }
  }
}

/**
 * Everything that stops Leasehold in the state home `stateHome`, each with
 * the file it is about, its workspace when known, the problem and the kind
 * of remedy that clears it (a `FindingRemedy`: data, for a tool to word).
 * Changes nothing (no staging sweep, no take-over).
 * Unsafe links, special files, owners and modes come first and alone: every
 * other read would refuse until they are fixed. A file that cannot be read is
 * a finding of its own, and the rest of its workspace is still checked.
 * @throws only what is not a ContractError (an I/O failure other than a refusal).
 */
export function diagnose(stateHome: string, options: DiagnoseOptions = {}): Finding[] {
  // One operation of private-files: the folders it reads through them are walked once.
  return fileOperation(() => diagnoseOnce(stateHome, options));
}

function diagnoseOnce(stateHome: string, options: DiagnoseOptions): Finding[] {
  const diagnosis = new Diagnosis(stateHome, options);
  const { layout } = diagnosis;
  // On a file system it does not allow, every read is refused: that alone is the finding (made or not).
  const unproven = diagnosis.unprovenFileSystem();
  if (unproven !== undefined) return [unproven];
  if (lookup(stateHome) === undefined) return [];
  // Made with mkdir and still empty (its first writer makes it 0700): nothing in it to find. An
  // unsafe one is refused here, and the walk below says why.
  if (
    diagnosis.guarded(
      () => diagnosis.registry.checkStateHome(),
      () => undefined,
    ) === false
  )
    return [];
  diagnosis.safety(stateHome);
  if (diagnosis.findings.length > 0) return diagnosis.findings; // fix modes and links first: every other read would refuse

  let registryError: ContractError | undefined;
  const rows = diagnosis.guarded(
    () => diagnosis.registry.list().entries,
    (error) => {
      registryError = error;
    },
  );
  const rowsByPrivateRoot = new Map((rows ?? []).map((row) => [workspacePlaces(row.root, stateHome).privateRoot, row]));
  // Every private root: the folders there are, and those a row names (a crash may have left a row alone).
  const folders = namesIn(layout.workspaces)
    .filter((name) => PRIVATE_ROOT_NAME.test(name))
    .map((name) => join(layout.workspaces, name));
  const privateRoots = [...new Set([...folders, ...rowsByPrivateRoot.keys()])];
  const workspaces = privateRoots
    .sort()
    .map((privateRoot) => readWorkspace(diagnosis, privateRoot, rowsByPrivateRoot.get(privateRoot)));

  diagnosis.strays(layout.namespace, [STAGING_FOLDER, ...NAMESPACE_ENTRIES]);
  diagnosis.strays(layout.registry, REGISTRY_FOLDER_ENTRIES);
  diagnosis.strays(layout.journal, [JOURNAL_RECORD_NAME]);
  diagnosis.strays(layout.workspaces, [PRIVATE_ROOT_NAME]);
  for (const read of workspaces) {
    diagnosis.strays(read.privateRoot, PRIVATE_ROOT_ENTRIES, read.root);
    diagnosis.strays(read.paths.service, SERVICE_ENTRIES, read.root);
  }
  diagnosis.staging();
  if (registryError !== undefined)
    diagnosis.unreadable(registryError, diagnosis.registryFileOf(registryError), undefined);
  diagnosis.registryLocks();
  for (const read of workspaces) workspaceFindings(diagnosis, read, registryError === undefined);
  return diagnosis.findings;
}
