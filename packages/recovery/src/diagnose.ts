import { lstatSync, readdirSync, type Stats } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import {
  ContractError,
  DOCUMENT_BYTES,
  REGISTRY_BYTES,
  decodeBytes,
  registryFormatSchema,
  reservationTableSchema,
  type CheckoutLock,
  type Companion,
  type Holder,
  type Registration,
  type Reservation,
} from '@leasehold/contracts';
import {
  PRIVATE_ROOT_ENTRIES,
  PRIVATE_ROOT_NAME,
  SERVICE_ENTRIES,
  SERVICE_FILES,
  readServiceFile,
  workspacePlaces,
  type ServiceFile,
} from '@leasehold/coordination';
import {
  PrivateFiles,
  STAGING_FOLDER,
  UnsafeEntryError,
  currentProcess,
  entryTypeBreach,
  ownerStatus,
  ownershipBreaches,
  retryingReads,
  type OwnerStatus,
  type PrivateFilesHooks,
  type StagingEntry,
  type UnsafeEntry,
} from '@leasehold/private-files';
import { NAMESPACE_ENTRIES, REGISTRY_FOLDER_ENTRIES, Registry, stateHomeLayout, takeoverMarker, type StateHomeLayout } from '@leasehold/registry';
import type { FindingRemedy, ProcessGone } from './finding-remedy.js';
import { JOURNAL_RECORD_NAME } from './journal.js';
import { recoverySnapshot } from './recover.js';
import { holderOf, holdsWorkspace, sameHolder, type RecoveryState } from './recovery-state.js';
import { rootExists } from './root-exists.js';

/** Every kind of finding `diagnose` reports (unsafe files first and alone; see the README for each). */
export const FINDING_KINDS = [
  'symbolic-link',
  'special-file',
  'foreign-owner',
  'open-mode',
  'stray-entry',
  'staging-leftover',
  'unreadable',
  'changing',
  'ambiguous-registry-lock',
  'ambiguous-takeover-marker',
  'deleted-root',
  'dead-owner',
  'ambiguous-owner',
  'dead-checkout-lock',
] as const;

export type FindingKind = (typeof FINDING_KINDS)[number];

/** One problem: what it is, the file or folder it is about, whose workspace, what is wrong and what kind of remedy clears it. */
export interface Finding {
  readonly kind: FindingKind;
  /** The absolute path of the file or folder. */
  readonly path: string;
  /** The workspace root the path belongs to, when it is known. */
  readonly workspace?: string;
  readonly problem: string;
  /** What clears it, with the proviso a person must check first when there is one. */
  readonly remedy: FindingRemedy;
}

export interface DiagnoseOptions {
  /** Handed to every PrivateFiles diagnosis uses (tests only: it never mutates, so the hook is never called). */
  readonly hooks?: PrivateFilesHooks;
}

/** Names of the journal's records (`<ISO time without separators>-<uuid>.json`) and of private roots. */


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

/** What one private root holds, read file by file, so that one unreadable file hides none of the others. */
interface WorkspaceRead {
  readonly privateRoot: string;
  readonly paths: Readonly<Record<ServiceFile, string>> & { readonly service: string };
  root: string | undefined;
  row: Reservation | undefined;
  registration: Registration | undefined;
  companion: Companion | undefined;
  checkoutLock: CheckoutLock | undefined;
  /** What could not be read (a file, or a folder), and the path read: each a finding once the workspace is known. */
  readonly problems: { readonly error: ContractError; readonly fallback: string }[];
}

class Diagnosis {
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
        return { kind: 'symbolic-link', path, problem: 'a symbolic link: Leasehold never follows one', remedy: { kind: 'remove', path, recursive: false } };
      case 'special-file':
        return { kind: 'special-file', path, problem: 'not a regular file or folder (a FIFO, socket or device)', remedy: { kind: 'remove', path, recursive: false } };
      case 'foreign-owner': {
        const uid = process.geteuid?.() ?? -1; // POSIX has it; elsewhere no file is this user's
        return { kind: 'foreign-owner', path, problem: `owned by uid ${breach.uid}, not by you`, remedy: this.foreignOwnerRemedy(path, breach.uid, uid) };
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
   * Runs a read; a `refused` becomes `onRefused(error)`, a `conflict` that
   * outlasted the retries `onChanging(error)`; anything else is rethrown.
   */
  guarded<T>(read: () => T, onRefused: (error: ContractError) => void, onChanging: (error: ContractError) => void = onRefused): T | undefined {
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
      problem: error.code === 'conflict' ? `kept changing while read (a writer is at work): ${error.message}` : `unreadable: ${error.message}`,
      remedy: error.code === 'conflict' ? { kind: 'wait-for-writer', stateHome: this.stateHome } : { kind: 'repair', path, stateHome: this.stateHome },
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
      [registryFormat, DOCUMENT_BYTES, (bytes) => decodeBytes(registryFormatSchema, bytes, DOCUMENT_BYTES, registryFormat)],
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
    if (lock === undefined || lock.holder === 'live') return;
    const blocked = 'every acquire, release and recovery answers quarantine';
    if (lock.holder === 'ambiguous') {
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
      if (marker === undefined || marker.holder === 'live') return;
      if (marker.holder === 'ambiguous') {
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

  /** What one private root holds; every file read on its own. */
  readWorkspace(privateRoot: string, row: Reservation | undefined): WorkspaceRead {
    // The paths of a workspace's files, below its private root, as coordination names them.
    const model = workspacePlaces('/', this.stateHome);
    const below = (path: string) => join(privateRoot, relative(model.privateRoot, path));
    const paths = Object.fromEntries(SERVICE_FILES.map((key) => [key, below(model[key])])) as Record<ServiceFile, string>;
    const read: WorkspaceRead = {
      privateRoot,
      paths: { ...paths, service: below(model.service) },
      root: row?.root,
      row,
      registration: undefined,
      companion: undefined,
      checkoutLock: undefined,
      problems: [],
    };
    const note = (fallback: string) => (error: ContractError) => read.problems.push({ error, fallback });
    const folders = this.guarded(() => this.files.directory(privateRoot) && this.files.directory(read.paths.service), note(privateRoot));
    const documents: Partial<Record<ServiceFile, unknown>> = {};
    for (const key of SERVICE_FILES) {
      if (key !== 'checkoutLock' && folders !== true) continue;
      const path = paths[key];
      documents[key] = this.guarded(() => readServiceFile(this.files, key, path)?.value, note(path));
    }
    read.registration = documents.registration as Registration | undefined;
    read.companion = documents.companion as Companion | undefined;
    read.checkoutLock = documents.checkoutLock as CheckoutLock | undefined;
    // The root: the row's, else the one the format or the registration names (when it hashes to this private root).
    for (const named of [(documents.format as { root: string } | undefined)?.root, read.registration?.root]) {
      if (read.root !== undefined || named === undefined) continue;
      if (workspacePlaces(named, this.stateHome).privateRoot === privateRoot) read.root = named;
    }
    return read;
  }

  /** Unreadable files, the owner's fences, and a plain tool's checkout lock, for one workspace. */
  workspace(read: WorkspaceRead, registryReadable: boolean): void {
    const { root } = read;
    for (const { error, fallback } of read.problems) this.unreadable(error, fallback, root);
    if (root === undefined) {
      this.plainCheckout(read);
      return;
    }
    let state: RecoveryState | undefined;
    if (read.problems.length === 0 && registryReadable) {
      const options = { stateHome: this.stateHome, sweepStaging: false, ...(this.hooks === undefined ? {} : { hooks: this.hooks }) };
      state = this.guarded(
        () => recoverySnapshot(root, options),
        (error) => this.unreadable(error, read.privateRoot, root),
      );
    }
    if (!this.owner(read, root, state)) this.plainCheckout(read);
  }

  /**
   * The finding for the owner's fences, if any: gone (recover), or named by a
   * holder this host cannot tell (recover from where it can be told). Without
   * a snapshot (a file above stops recovery from reading), the holders named
   * by the row, a registration that is not stopped and a companion. True when it reported one.
   */
  owner(read: WorkspaceRead, root: string, state: RecoveryState | undefined): boolean {
    const deleted = read.row !== undefined && !rootExists(root);
    let holders: { holder: Holder; status: OwnerStatus; path: string }[];
    let remaining: { kind: string; path: string }[] = [];
    if (state !== undefined) {
      remaining = state.fences.filter(holdsWorkspace);
      holders = state.holders.map(({ holder, status }) => ({
        holder,
        status,
        path: state.fences.find((fence) => fence.holder !== undefined && sameHolder(fence.holder, holder))?.path ?? read.paths.service,
      }));
      if (state.clear && !deleted) return false;
      if (this.plainToolOnly(read, remaining)) return false;
    } else {
      holders = [];
      if (read.row !== undefined) holders.push({ holder: holderOf(read.row), status: 'absent', path: this.layout.roots });
      if (read.registration !== undefined && read.registration.phase !== 'stopped') {
        holders.push({ holder: holderOf(read.registration), status: 'absent', path: read.paths.registration });
      }
      if (read.companion !== undefined) holders.push({ holder: holderOf(read.companion), status: 'absent', path: read.paths.companion });
      holders = holders.map((entry) => ({ ...entry, status: ownerStatus(entry.holder.pid, entry.holder.host, entry.holder.processStart) }));
      if (holders.length === 0 && !deleted) return false;
    }
    const live = holders.find(({ status }) => status === 'live');
    const ambiguous = holders.find(({ status }) => status === 'ambiguous');
    const first = holders[0];
    const named = (holder: Holder) => `pid ${holder.pid} on ${holder.host}`;
    const recoverHere: FindingRemedy = { kind: 'recover', workspace: root, stateHome: this.stateHome };
    const ambiguousRemedy = ({ pid, host }: Holder): FindingRemedy => {
      const runFrom: ProcessGone['runFrom'] = host === currentProcess().host ? 'its-pid-namespace' : 'its-host';
      return { ...recoverHere, processGone: { pid, host, runFrom } };
    };
    const pending = state === undefined ? '; recovery reads every file strictly: fix the findings above first' : '';
    if (deleted) {
      const shown = live ?? ambiguous ?? first;
      const owner = shown === undefined ? 'unknown' : `${named(shown.holder)} is ${shown.status === 'absent' ? 'not live' : shown.status}`;
      let remedy: FindingRemedy = recoverHere;
      if (live !== undefined) remedy = { kind: 'stop', workspace: root, stateHome: this.stateHome };
      else if (ambiguous !== undefined) remedy = ambiguousRemedy(ambiguous.holder);
      this.add({
        kind: 'deleted-root',
        path: this.layout.roots,
        workspace: root,
        problem: `${root} is registered but its folder no longer exists (owner ${owner})${pending}`,
        remedy,
      });
      return true;
    }
    if (live !== undefined) return false; // a running owner (or one in the middle of its acquire or release)
    if (ambiguous !== undefined) {
      this.add({
        kind: 'ambiguous-owner',
        path: ambiguous.path,
        workspace: root,
        problem:
          `fenced by ${named(ambiguous.holder)}, which this host cannot tell live or gone (another host or PID namespace): ` +
          `serve and recover here refuse until it is told gone${pending}`,
        remedy: ambiguousRemedy(ambiguous.holder),
      });
      return true;
    }
    const kinds = state === undefined ? [] : remaining.map((fence) => fence.kind);
    this.add({
      kind: 'dead-owner',
      path: remaining[0]?.path ?? first?.path ?? read.paths.service,
      workspace: root,
      problem:
        state === undefined
          ? `the owner of ${root} (${first === undefined ? 'unknown' : named(first.holder)}) is gone and its fences remain${pending}`
          : `the owner of ${root} is gone but ${kinds.length} fence(s) remain: ${kinds.join(', ')}`,
      remedy: recoverHere,
    });
    return true;
  }

  /** True when all that remains is a plain tool's checkout lock (no row, not the registration's token): its own finding. */
  plainToolOnly(read: WorkspaceRead, remaining: readonly { kind: string }[]): boolean {
    return (
      read.row === undefined &&
      remaining.length === 1 &&
      remaining[0]?.kind === 'checkout-lock' &&
      read.checkoutLock !== undefined &&
      read.checkoutLock.token !== read.registration?.checkoutToken
    );
  }

  /** A plain tool's checkout lock whose holder is gone (a service's is recovery's). */
  plainCheckout(read: WorkspaceRead): void {
    const lock = read.checkoutLock;
    if (lock === undefined || lock.token === read.registration?.checkoutToken || read.row !== undefined) return;
    if (ownerStatus(lock.pid, lock.host, lock.processStart) !== 'absent') return;
    const path = read.paths.checkoutLock;
    this.add({
      kind: 'dead-checkout-lock',
      path,
      ...(read.root === undefined ? {} : { workspace: read.root }),
      problem: `a checkout lock left by a tool that is gone (pid ${lock.pid} on ${lock.host}); tools and services stay blocked`,
      remedy: { kind: 'remove', path, recursive: false },
    });
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
  const diagnosis = new Diagnosis(stateHome, options);
  const { layout } = diagnosis;
  if (lookup(stateHome) === undefined) return [];
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
  const workspaces = privateRoots.sort().map((privateRoot) => diagnosis.readWorkspace(privateRoot, rowsByPrivateRoot.get(privateRoot)));

  diagnosis.strays(layout.namespace, [STAGING_FOLDER, ...NAMESPACE_ENTRIES]);
  diagnosis.strays(layout.registry, REGISTRY_FOLDER_ENTRIES);
  diagnosis.strays(layout.journal, [JOURNAL_RECORD_NAME]);
  diagnosis.strays(layout.workspaces, [PRIVATE_ROOT_NAME]);
  for (const read of workspaces) {
    diagnosis.strays(read.privateRoot, PRIVATE_ROOT_ENTRIES, read.root);
    diagnosis.strays(read.paths.service, SERVICE_ENTRIES, read.root);
  }
  diagnosis.staging();
  if (registryError !== undefined) diagnosis.unreadable(registryError, diagnosis.registryFileOf(registryError), undefined);
  diagnosis.registryLocks();
  for (const read of workspaces) diagnosis.workspace(read, registryError === undefined);
  return diagnosis.findings;
}
