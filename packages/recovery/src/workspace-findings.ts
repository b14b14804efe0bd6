import { existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import {
  folderMarkPlaces,
  workspacePlaces,
  type CheckoutLock,
  type Companion,
  type ContractError,
  type Holder,
  type Registration,
  type Reservation,
  type StateHomeLayout,
} from '@leasehold/contracts';
import { SERVICE_FILES, readServiceFile, type ServiceFile } from '@leasehold/coordination';
import {
  currentProcess,
  ownerStatus,
  processDetails,
  type OwnerStatus,
  type PrivateFiles,
  type PrivateFilesHooks,
} from '@leasehold/private-files';
import type { FindingRemedy, ProcessGone } from './finding-remedy.js';
import type { Finding } from './findings.js';
import { outlivingProgram } from './outliving-program.js';
import { recoveryView } from './recover.js';
import { holderOf, holdsWorkspace, sameHolder, type FileRecoveryView } from './recovery-state.js';
import { rootExists } from './root-exists.js';

// The findings of one workspace: its files read one by one, then its owner's fences or a plain
// tool's checkout lock. The state home's own checks (unsafe entries, strays, staging, the
// registry lock) are diagnose's; these ask them for reads that report instead of throwing.

/** What the workspace checks use of the diagnosis of the whole state home. */
export interface DiagnosisContext {
  readonly stateHome: string;
  readonly layout: StateHomeLayout;
  readonly files: PrivateFiles;
  readonly hooks: PrivateFilesHooks | undefined;
  add(finding: Finding): void;
  /** Runs a read; a refusal or a lasting conflict goes to the handlers, and the answer is then undefined. */
  guarded<T>(
    read: () => T,
    onRefused: (error: ContractError) => void,
    onChanging?: (error: ContractError) => void,
  ): T | undefined;
  /** A finding for a file that cannot be read, unless another finding already covers it. */
  unreadable(error: ContractError, fallback: string, workspace: string | undefined): void;
}

/** What one private root holds, read file by file, so that one unreadable file hides none of the others. */
export interface WorkspaceRead {
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

/** What one private root holds; every file read on its own. */
export function readWorkspace(
  diagnosis: DiagnosisContext,
  privateRoot: string,
  row: Reservation | undefined,
): WorkspaceRead {
  // The paths of a workspace's files, below its private root, as coordination names them.
  const model = workspacePlaces('/', diagnosis.stateHome);
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
  const folders = diagnosis.guarded(
    () => diagnosis.files.directory(privateRoot) && diagnosis.files.directory(read.paths.service),
    note(privateRoot),
  );
  const documents: Partial<Record<ServiceFile, unknown>> = {};
  for (const key of SERVICE_FILES) {
    if (key !== 'checkoutLock' && folders !== true) continue;
    const path = paths[key];
    documents[key] = diagnosis.guarded(() => readServiceFile(diagnosis.files, key, path)?.value, note(path));
  }
  read.registration = documents.registration as Registration | undefined;
  read.companion = documents.companion as Companion | undefined;
  read.checkoutLock = documents.checkoutLock as CheckoutLock | undefined;
  // The root: the row's, else the one the format or the registration names (when it hashes to this private root).
  for (const named of [(documents.format as { root: string } | undefined)?.root, read.registration?.root]) {
    if (read.root !== undefined || named === undefined) continue;
    if (workspacePlaces(named, diagnosis.stateHome).privateRoot === privateRoot) read.root = named;
  }
  return read;
}

/** Unreadable files, the owner's fences, and a plain tool's checkout lock, for one workspace. */
export function workspaceFindings(diagnosis: DiagnosisContext, read: WorkspaceRead, registryReadable: boolean): void {
  const { root } = read;
  for (const { error, fallback } of read.problems) diagnosis.unreadable(error, fallback, root);
  if (root === undefined) {
    plainCheckout(diagnosis, read);
    return;
  }
  let state: FileRecoveryView | undefined;
  if (read.problems.length === 0 && registryReadable) {
    const options = {
      stateHome: diagnosis.stateHome,
      sweepStaging: false,
      ...(diagnosis.hooks === undefined ? {} : { hooks: diagnosis.hooks }),
    };
    state = diagnosis.guarded(
      () => recoveryView(root, options),
      (error) => diagnosis.unreadable(error, read.privateRoot, root),
    );
  }
  if (!ownerFinding(diagnosis, read, root, state)) plainCheckout(diagnosis, read);
}

/**
 * The finding for the owner's fences, if any: gone (recover), or named by a
 * holder this host cannot tell (recover from where it can be told). Without
 * a snapshot (a file above stops recovery from reading), the holders named
 * by the row, a registration that is not stopped and a companion. True when it reported one.
 */
function ownerFinding(
  diagnosis: DiagnosisContext,
  read: WorkspaceRead,
  root: string,
  state: FileRecoveryView | undefined,
): boolean {
  const deleted = read.row !== undefined && !rootExists(root);
  let holders: { holder: Holder; verdict: OwnerStatus; path: string }[];
  let remaining: { kind: string; path: string }[] = [];
  if (state !== undefined) {
    remaining = state.fences.filter(holdsWorkspace);
    holders = state.holders.map(({ holder, verdict }) => ({
      holder,
      verdict,
      path:
        state.fences.find((fence) => fence.holder !== undefined && sameHolder(fence.holder, holder))?.path ??
        read.paths.service,
    }));
    if (state.clear && !deleted) return false;
    if (plainToolOnly(read, remaining)) return false;
  } else {
    holders = [];
    if (read.row !== undefined)
      holders.push({ holder: holderOf(read.row), verdict: 'absent', path: diagnosis.layout.roots });
    if (read.registration !== undefined && read.registration.phase !== 'stopped') {
      holders.push({ holder: holderOf(read.registration), verdict: 'absent', path: read.paths.registration });
    }
    if (read.companion !== undefined)
      holders.push({ holder: holderOf(read.companion), verdict: 'absent', path: read.paths.companion });
    holders = holders.map((entry) => ({
      ...entry,
      verdict: ownerStatus(entry.holder.pid, entry.holder.host, entry.holder.processStart),
    }));
    if (holders.length === 0 && !deleted) return false;
  }
  const live = holders.find(({ verdict }) => verdict === 'live');
  const ambiguous = holders.find(({ verdict }) => verdict === 'ambiguous');
  const first = holders[0];
  const named = (holder: Holder) => `pid ${holder.pid} on ${holder.host}`;
  const recoverHere: FindingRemedy = { kind: 'recover', workspace: root, stateHome: diagnosis.stateHome };
  const ambiguousRemedy = ({ pid, host }: Holder): FindingRemedy => {
    const runFrom: ProcessGone['runFrom'] = host === currentProcess().host ? 'its-pid-namespace' : 'its-host';
    return { ...recoverHere, processGone: { pid, host, runFrom } };
  };
  const pending = state === undefined ? '; recovery reads every file strictly: fix the findings above first' : '';
  if (deleted) {
    const shown = live ?? ambiguous ?? first;
    const owner =
      shown === undefined
        ? 'unknown'
        : `${named(shown.holder)} is ${shown.verdict === 'absent' ? 'not live' : shown.verdict}`;
    let remedy: FindingRemedy = recoverHere;
    if (live !== undefined) remedy = { kind: 'stop', workspace: root, stateHome: diagnosis.stateHome };
    else if (ambiguous !== undefined) remedy = ambiguousRemedy(ambiguous.holder);
    diagnosis.add({
      kind: 'deleted-root',
      path: diagnosis.layout.roots,
      workspace: root,
      problem: `${root} is registered but its folder no longer exists (owner ${owner})${pending}`,
      remedy,
    });
    return true;
  }
  const program = state === undefined ? undefined : outlivingProgram(state);
  if (program !== undefined) {
    outlivingProgramFinding(diagnosis, root, program, read.paths.companion);
    return true;
  }
  if (live !== undefined) return false; // a running owner (or one in the middle of its acquire or release)
  if (ambiguous !== undefined) {
    diagnosis.add({
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
  diagnosis.add({
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

/**
 * The program a crashed owner fenced the workspace with, still running: named with what this host
 * shows of it (its command line and process group), for a person to recognise before ending it.
 */
function outlivingProgramFinding(diagnosis: DiagnosisContext, root: string, program: Holder, path: string): void {
  const details = processDetails(program);
  const shown =
    details === undefined
      ? ''
      : `, started as ${JSON.stringify(details.commandLine)}, in process group ${details.processGroup}`;
  diagnosis.add({
    kind: 'outliving-program',
    path,
    workspace: root,
    problem:
      `the owner of ${root} is gone, but the program it fenced the workspace with lives on: pid ${program.pid} on ${program.host}${shown}; ` +
      'serve, run and recover refuse until it ends',
    remedy: { kind: 'stop', workspace: root, stateHome: diagnosis.stateHome },
  });
}

/**
 * True when all that remains is a plain tool's checkout lock (no row, not the registration's
 * token), with the folder's mark it took beside it: its own finding.
 */
function plainToolOnly(read: WorkspaceRead, remaining: readonly { kind: string }[]): boolean {
  const kinds = remaining.map((fence) => fence.kind).filter((kind) => kind !== 'folder-mark');
  return (
    read.row === undefined &&
    kinds.length === 1 &&
    kinds[0] === 'checkout-lock' &&
    read.checkoutLock !== undefined &&
    read.checkoutLock.token !== read.registration?.checkoutToken
  );
}

/** A plain tool's checkout lock whose holder is gone (a service's is recovery's). */
function plainCheckout(diagnosis: DiagnosisContext, read: WorkspaceRead): void {
  const lock = read.checkoutLock;
  if (lock === undefined || lock.token === read.registration?.checkoutToken || read.row !== undefined) return;
  if (ownerStatus(lock.pid, lock.host, lock.processStart) !== 'absent') return;
  const path = read.paths.checkoutLock;
  diagnosis.add({
    kind: 'dead-checkout-lock',
    path,
    ...(read.root === undefined ? {} : { workspace: read.root }),
    problem: `a checkout lock left by a tool that is gone (pid ${lock.pid} on ${lock.host}); tools and services stay blocked`,
    // With the folder's mark the tool took, a recovery removes both (journalled); the lock alone, a removal.
    remedy:
      read.root !== undefined && existsSync(folderMarkPlaces(read.root).mark)
        ? { kind: 'recover', workspace: read.root, stateHome: diagnosis.stateHome }
        : { kind: 'remove', path, recursive: false },
  });
}
