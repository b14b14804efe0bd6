import { lstatSync, readdirSync, type Stats } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  ContractError,
  DOCUMENT_BYTES,
  PATHS_DOCUMENT_BYTES,
  checkoutLockSchema,
  decodeBytes,
  registrationSchema,
  serviceFormatSchema,
} from '@leasehold/contracts';
import { PRIVATE_ROOT_ENTRIES, SERVICE_ENTRIES, workspacePlaces } from '@leasehold/coordination';
import { PrivateFiles, ownerStatus } from '@leasehold/private-files';
import { recoverySnapshot } from '@leasehold/recovery';
import { NAMESPACE_ENTRIES, REGISTRY_FOLDER_ENTRIES, Registry, stateHomeLayout } from '@leasehold/registry';
import { placeOptions, shellQuote, stateHomeOf, type CommandContext } from '../context.js';
import { registryEntries, rootExists } from './list.js';

/** Exit status of `doctor` when it found something. */
export const FINDINGS_EXIT = 3;

/** One problem: the file, what is wrong, and the exact command that fixes it. */
export interface Finding {
  readonly file: string;
  readonly problem: string;
  readonly fix: string;
}

interface Scope {
  readonly stateHome: string;
  readonly namespace: string;
  readonly findings: Finding[];
  readonly files: PrivateFiles;
  readonly registry: Registry;
}

function lookup(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

function names(folder: string): string[] {
  try {
    return readdirSync(folder).sort();
  } catch {
    return [];
  }
}

/** Links, special files, other owners and loose modes, everywhere under the state home. */
function checkSafety(scope: Scope, path: string): void {
  const stats = lookup(path);
  if (stats === undefined) return;
  const quoted = shellQuote(path);
  const report = (problem: string, fix: string): void => {
    scope.findings.push({ file: path, problem, fix });
  };
  if (stats.isSymbolicLink()) return report('a symbolic link: Leasehold never follows one', `rm ${quoted}`);
  if (!stats.isDirectory() && !stats.isFile()) return report('not a regular file or folder (a FIFO, socket or device)', `rm ${quoted}`);
  if (stats.uid !== process.geteuid?.()) report(`owned by uid ${stats.uid}, not by you`, `chown ${process.geteuid?.()} ${quoted}`);
  const wanted = stats.isDirectory() ? 0o700 : 0o600;
  if ((stats.mode & 0o077) !== 0) {
    report(`mode ${(stats.mode & 0o777).toString(8)}: group or others have access`, `chmod ${wanted.toString(8)} ${quoted}`);
  }
  if (stats.isDirectory()) for (const name of names(path)) checkSafety(scope, join(path, name));
}

function checkAllowed(scope: Scope, folder: string, allowed: (name: string) => boolean): void {
  for (const name of names(folder)) {
    if (allowed(name)) continue;
    const path = join(folder, name);
    scope.findings.push({
      file: path,
      problem: 'a stray entry: Leasehold refuses a folder holding names it does not know',
      fix: `rm -r ${shellQuote(path)}`,
    });
  }
}

/** Names that do not belong, in every folder Leasehold owns. */
function checkStrays(scope: Scope): void {
  const { namespace } = scope;
  checkAllowed(scope, namespace, (name) => name === '.staging' || (NAMESPACE_ENTRIES as readonly string[]).includes(name));
  checkAllowed(scope, join(namespace, 'registry'), (name) =>
    REGISTRY_FOLDER_ENTRIES.some((entry) => (typeof entry === 'string' ? entry === name : entry.test(name))),
  );
  checkAllowed(scope, join(namespace, 'journal'), (name) => /^[0-9TZ]+-[0-9a-f-]{36}\.json$/.test(name));
  const workspaces = join(namespace, 'workspaces');
  checkAllowed(scope, workspaces, (name) => /^[0-9a-f]{32}$/.test(name));
  for (const name of names(workspaces).filter((entry) => /^[0-9a-f]{32}$/.test(entry))) {
    const privateRoot = join(workspaces, name);
    checkAllowed(scope, privateRoot, (entry) => (PRIVATE_ROOT_ENTRIES as readonly string[]).includes(entry));
    checkAllowed(scope, join(privateRoot, 'service'), (entry) => (SERVICE_ENTRIES as readonly string[]).includes(entry));
  }
}

function checkStaging(scope: Scope): void {
  for (const entry of guarded(scope, () => scope.files.stagingEntries()) ?? []) {
    if (entry.writer === 'live') continue; // a write in progress
    const whose = entry.writer === 'absent' ? 'a writer that is gone' : 'a writer this host cannot tell';
    scope.findings.push({
      file: entry.path,
      problem: `a staging leftover of ${whose}${entry.writer === 'absent' ? '' : '; make sure no Leasehold process of another host or container uses it'}`,
      fix: `rm -r ${shellQuote(entry.path)}`,
    });
  }
}

/** Runs a read; a ContractError becomes a finding about that file, with no command (it needs a person). */
function guarded<T>(scope: Scope, read: () => T): T | undefined {
  try {
    return read();
  } catch (error) {
    if (!ContractError.is(error)) throw error;
    const file = error.message.split(': ')[0] ?? scope.namespace;
    // A folder refused for holding a stray entry is already reported, with the stray and its fix;
    // a second finding would tell the person to remove the whole folder (and the fences in it).
    const strayIn = (finding: Finding) => finding.problem.startsWith('a stray entry') && dirname(finding.file) === file;
    if (error.code === 'refused' && !scope.findings.some(strayIn)) {
      scope.findings.push({
        file,
        problem: `unreadable: ${error.message}`,
        fix: 'repair or remove the file by hand (restore it from a backup); Leasehold never rewrites a file it cannot read',
      });
    }
    return undefined;
  }
}

/**
 * A registry lock (or take-over marker) whose holder cannot be told from
 * here (another host or PID namespace): every transaction answers
 * quarantine until a person has checked that holder is gone. A dead
 * holder's lock is no finding: the next writer takes it over.
 */
function checkRegistryLock(scope: Scope): void {
  const locks = [guarded(scope, () => scope.registry.readLock()), ...(guarded(scope, () => scope.registry.readMarkers()) ?? [])];
  for (const lock of locks) {
    if (lock === undefined || lock.holder !== 'ambiguous') continue;
    scope.findings.push({
      file: lock.path,
      problem: `held by pid ${lock.lock.pid} on ${lock.lock.host}, which this host cannot tell live or gone; every acquire and release answers quarantine`,
      fix: `make sure that process is gone, then: rm ${shellQuote(lock.path)}`,
    });
  }
}

/** The workspace roots Leasehold knows of: registered rows, and service formats. */
function knownRoots(scope: Scope, rows: readonly string[]): Map<string, string> {
  const byHash = new Map<string, string>();
  for (const root of rows) byHash.set(workspacePlaces(root, scope.stateHome).privateRoot, root);
  const workspaces = join(scope.namespace, 'workspaces');
  for (const name of names(workspaces)) {
    const privateRoot = join(workspaces, name);
    if (byHash.has(privateRoot)) continue;
    const format = guarded(scope, () => scope.files.read(join(privateRoot, 'service', 'format.json'), PATHS_DOCUMENT_BYTES));
    if (format === undefined) continue;
    const root = guarded(scope, () => decodeBytes(serviceFormatSchema, format.bytes, PATHS_DOCUMENT_BYTES, 'format.json').root);
    if (root !== undefined && workspacePlaces(root, scope.stateHome).privateRoot === privateRoot) byHash.set(privateRoot, root);
  }
  return byHash;
}

function checkDeletedRoots(scope: Scope, rows: ReturnType<typeof registryEntries>): void {
  for (const row of rows) {
    if (rootExists(row.root)) continue;
    const live = ownerStatus(row.pid, row.host, row.processStart) === 'live';
    scope.findings.push({
      file: scope.registry.layout.roots,
      problem: `${row.root} is registered but its folder no longer exists (owner pid ${row.pid} is ${live ? 'live' : 'not live'})`,
      fix: live ? `leasehold stop ${placeOptions(row.root, scope.stateHome)}` : `leasehold recover ${placeOptions(row.root, scope.stateHome)}`,
    });
  }
}

function checkWorkspace(scope: Scope, root: string, registered: boolean): void {
  const places = workspacePlaces(root, scope.stateHome);
  if (registered && !rootExists(root)) return; // reported with the registry
  const state = guarded(scope, () => recoverySnapshot(root, { stateHome: scope.stateHome, sweepStaging: false }));
  if (state !== undefined && !state.clear && state.holders.every(({ status }) => status === 'absent')) {
    const remaining = state.fences.filter(
      (fence) => fence.kind !== 'service-format' && fence.kind !== 'service-config' && fence.phase !== 'stopped',
    );
    scope.findings.push({
      file: remaining[0]?.path ?? places.service,
      problem: `the owner of ${root} is gone but ${remaining.length} fence(s) remain: ${remaining.map((fence) => fence.kind).join(', ')}`,
      fix: `leasehold recover ${placeOptions(root, scope.stateHome)}`,
    });
    return;
  }
  checkPlainCheckout(scope, places.checkoutLock, places.registration);
}

/** A plain tool's checkout lock whose holder is gone (a service's is recovery's). */
function checkPlainCheckout(scope: Scope, path: string, registrationPath: string): void {
  const snapshot = guarded(scope, () => scope.files.read(path, DOCUMENT_BYTES));
  if (snapshot === undefined) return;
  const lock = guarded(scope, () => decodeBytes(checkoutLockSchema, snapshot.bytes, DOCUMENT_BYTES, path));
  if (lock === undefined || ownerStatus(lock.pid, lock.host, lock.processStart) !== 'absent') return;
  const registration = guarded(scope, () => scope.files.read(registrationPath, PATHS_DOCUMENT_BYTES));
  const token = registration && guarded(scope, () => decodeBytes(registrationSchema, registration.bytes, PATHS_DOCUMENT_BYTES, registrationPath).checkoutToken);
  if (token === lock.token) return;
  scope.findings.push({
    file: path,
    problem: `a checkout lock left by a tool that is gone (pid ${lock.pid} on ${lock.host}); tools and services stay blocked`,
    fix: `rm ${shellQuote(path)}`,
  });
}

function findings(stateHome: string): Finding[] {
  const { namespace } = stateHomeLayout(stateHome);
  const scope: Scope = {
    stateHome,
    namespace,
    findings: [],
    files: new PrivateFiles(namespace),
    registry: new Registry(stateHome),
  };
  if (lookup(stateHome) === undefined) return [];
  checkSafety(scope, stateHome);
  if (scope.findings.length > 0) return scope.findings; // fix modes and links first: every other read would refuse
  checkStrays(scope);
  checkStaging(scope);
  const rows = guarded(scope, () => registryEntries(scope.registry)) ?? [];
  checkRegistryLock(scope);
  checkDeletedRoots(scope, rows);
  const registered = new Set(rows.map((row) => row.root));
  const known = knownRoots(scope, [...registered]);
  for (const root of known.values()) checkWorkspace(scope, root, registered.has(root));
  checkUnknownCheckouts(scope, known);
  return scope.findings;
}

/** Checkout locks in private roots whose workspace is known only by its hash (a plain tool, never served). */
function checkUnknownCheckouts(scope: Scope, known: Map<string, string>): void {
  const workspaces = join(scope.namespace, 'workspaces');
  for (const name of names(workspaces)) {
    const privateRoot = join(workspaces, name);
    if (known.has(privateRoot)) continue;
    checkPlainCheckout(scope, join(privateRoot, 'checkout.lock'), join(privateRoot, 'service', 'registration.json'));
  }
}

/** `leasehold doctor`: every finding with its file, the problem and the exact command that fixes it. Changes nothing. */
export async function doctor(context: CommandContext): Promise<number> {
  const stateHome = stateHomeOf(context);
  const found = findings(stateHome);
  const { output } = context;
  output.record({ findings: found });
  if (found.length === 0) output.say(`no problem found in ${stateHome}`);
  for (const finding of found) output.say(finding.file, `  problem: ${finding.problem}`, `  fix:     ${finding.fix}`, '');
  return found.length === 0 ? 0 : FINDINGS_EXIT;
}
