import { fork } from 'node:child_process';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ServiceCoordination } from '@leasehold/coordination';
import { PrivateFiles, type MutationStep } from '@leasehold/private-files';
import { recover, recoverySnapshot } from '@leasehold/recovery';
import { Registry } from '@leasehold/registry';
import { CONFIG, boundEndpoint, documentBytes, type BenchPlace } from './fixtures.js';

// Item 7 of issue #6, the fsync row of issue #9 and issue 13: the fsyncs
// each operation makes, seen through the beforeMutation hook (called before
// every mutating system call), against the previous release's count.

const CRASH_WORKER = fileURLToPath(new URL('./crash-worker.js', import.meta.url));

/**
 * Where the proof is that the fsyncs this release no longer makes are not
 * needed, and what it found: the power-loss exploration of issue 13.
 */
export const FSYNC_PROOF =
  'the previous release also fsynced the registry folder right after registry.lock was linked and right after it was unlinked; ' +
  'this release publishes and removes the lock without them (PublishOptions { syncFolder: false }, registry LOCK_PUBLISH). ' +
  'The proof that neither is needed: packages/recovery/src/power-loss.test.ts explores every crash state of all six protocols ' +
  'without them and finds nothing; packages/recovery/src/power-loss-fsyncs.test.ts drops each remaining fsync in turn and ' +
  'prints, per protocol, how many are needed one at a time (a lower bound on the minimum, not the minimum).';

/** Whether `path` is the registry lock (in the registry folder; a take-over marker is not). */
function isRegistryLock(path: string): boolean {
  return basename(dirname(path)) === 'registry' && basename(path) === 'registry.lock';
}

/** The fsyncs of one operation. */
export interface FsyncCount {
  readonly id: string;
  readonly label: string;
  /** fsync of a file (a staged temp). */
  readonly file: number;
  /** fsync of a folder. */
  readonly folder: number;
  /** What this run measured: `file + folder`. */
  readonly total: number;
  /** Durable publications: links, renames, removals and folder creations. */
  readonly publications: number;
  /** The publications by kind: what their exact floor is made of. */
  readonly kinds: { readonly create: number; readonly replace: number; readonly remove: number; readonly folder: number };
  /** The links and unlinks of registry.lock that no registry folder fsync of their own followed (see `FSYNC_PROOF`). */
  readonly unsyncedLock: number;
  /** What the previous release made for the same operation: `total` plus one registry folder fsync per `unsyncedLock`. */
  readonly previousRelease: number;
}

/** Whether a step publishes an entry durably (its folder is fsynced after it, unless asked not to be). */
function publishes(step: MutationStep): boolean {
  if (step.action === 'link' || step.action === 'rename') return true;
  if (step.operation === 'remove' && step.action === 'unlink') return true;
  return step.operation === 'directory' && step.action === 'mkdir';
}

/** Whether a step is the link (create) or the unlink (remove) of registry.lock. */
function publishesLock(step: MutationStep): boolean {
  return ((step.operation === 'create' && step.action === 'link') || (step.operation === 'remove' && step.action === 'unlink')) && isRegistryLock(step.path);
}

/** How many links and unlinks of registry.lock in `steps` the same call did not follow with a fsync of its folder. */
function unsyncedLockPublications(steps: readonly MutationStep[]): number {
  return steps.filter((step, index) => {
    if (!publishesLock(step)) return false;
    // The rest of the same call: the steps up to the next one of another operation or the next publication.
    for (const later of steps.slice(index + 1)) {
      if (later.operation !== step.operation || publishes(later)) return true;
      if (later.action === 'fsync-directory' && later.path === dirname(step.path)) return false;
    }
    return true;
  }).length;
}

/** Counts one run of `steps` for the operation `id`. */
function countOf(id: string, label: string, steps: readonly MutationStep[]): FsyncCount {
  const file = steps.filter((step) => step.action === 'fsync').length;
  const folder = steps.filter((step) => step.action === 'fsync-directory').length;
  const unsyncedLock = unsyncedLockPublications(steps);
  return {
    id,
    label,
    file,
    folder,
    total: file + folder,
    publications: steps.filter(publishes).length,
    kinds: {
      create: steps.filter((step) => step.operation === 'create' && step.action === 'link').length,
      replace: steps.filter((step) => step.operation === 'replace' && step.action === 'rename').length,
      remove: steps.filter((step) => step.operation === 'remove' && step.action === 'unlink').length,
      folder: steps.filter((step) => (step.operation === 'directory' && step.action === 'mkdir') || (step.operation === 'create-folder' && step.action === 'rename')).length,
    },
    unsyncedLock,
    previousRelease: file + folder + unsyncedLock,
  };
}

/** Runs the crash worker in `mode` to its end: it dies holding what `mode` says. */
function crash(mode: 'owner' | 'registry-writer', stateHome: string, workspace: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = fork(CRASH_WORKER, [mode, stateHome, workspace, boundEndpoint()], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.once('error', reject);
    child.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`crash worker (${mode}) exited ${signal ?? code}`))));
  });
}

/** The ids of every count, in the order they are printed. */
const FSYNC_COUNT_IDS = [
  'files.create',
  'files.replace',
  'files.remove',
  'files.read',
  'acquire.fresh',
  'release.fresh',
  'acquire.reused',
  'phase',
  'release.reused',
  'recovery',
  'registry.transaction',
  'registry.takeover',
  'inspect',
  'local-access',
] as const;

/**
 * Runs each counted operation once with a recording hook, after a warm-up
 * that makes the folders every later call finds in place (the staging
 * folder, the registry, the workspaces folder, the journal).
 */
export async function countFsyncs(place: BenchPlace): Promise<FsyncCount[]> {
  let steps: MutationStep[] = [];
  const hooks = { beforeMutation: (step: MutationStep) => void steps.push(step) };
  const counts: FsyncCount[] = [];
  const measure = async <T>(id: string, label: string, action: () => T | Promise<T>): Promise<T> => {
    steps = [];
    const result = await action();
    counts.push(countOf(id, label, steps));
    return result;
  };

  const bytes = documentBytes();
  const files = new PrivateFiles(place.folder('counted-files'), { hooks });
  const documents = place.folder('counted-files', 'documents');
  files.create(join(documents, 'warm-up'), bytes);
  const created = await measure('files.create', 'private-files create', () => files.create(join(documents, 'counted'), bytes));
  const replaced = await measure('files.replace', 'private-files replace', () => files.replace(join(documents, 'counted'), created, bytes));
  await measure('files.read', 'private-files read', () => files.read(join(documents, 'counted')));
  await measure('files.remove', 'private-files remove', () => files.remove(join(documents, 'counted'), replaced));

  const stateHome = join(place.root, 'state-counted');
  const options = { stateHome, hooks };
  const warmUp = new ServiceCoordination(place.workspace(), options);
  await (await warmUp.acquire(CONFIG, boundEndpoint())).release();

  const coordination = new ServiceCoordination(place.workspace(), options);
  const endpoint = boundEndpoint();
  const fresh = await measure('acquire.fresh', 'acquire, fresh workspace', () => coordination.acquire(CONFIG, endpoint));
  await measure('release.fresh', 'release, fresh workspace', () => fresh.release());
  const reused = await measure('acquire.reused', 'acquire, reused workspace', () => coordination.acquire(CONFIG, endpoint));
  await measure('inspect', 'inspect() of a held workspace', () => coordination.inspect());
  await measure('local-access', 'localAccess() of a held workspace', () => coordination.localAccess());
  await measure('phase', 'phase(stopping), reused workspace', () => reused.phase('stopping'));
  await measure('release.reused', 'release, reused workspace (from stopping)', () => reused.release());

  // Recovery of an owner that died holding its workspace: one first (it makes the journal folder), then the counted one.
  const assertAuthority = () => undefined;
  for (const counted of [false, true]) {
    const crashed = place.workspace();
    await crash('owner', stateHome, crashed);
    const { digest } = recoverySnapshot(crashed, { stateHome });
    const recovery = () => recover(crashed, { stateHome, hooks, expectedDigest: digest, assertAuthority });
    const outcome = counted ? await measure('recovery', 'recover() of a dead owner', recovery) : await recovery();
    if (!outcome.recovered) throw new Error('fsync count: the crashed owner had nothing to recover');
  }

  // A registry transaction that writes nothing, free, then after a writer died inside one.
  const registry = new Registry(stateHome, { hooks });
  const root = place.workspace();
  await measure('registry.transaction', 'registry transaction, nothing written', () => registry.transaction(root, () => undefined));
  await crash('registry-writer', stateHome, place.workspace());
  await measure('registry.takeover', 'registry transaction, a dead writer’s lock taken over', () => registry.transaction(root, () => undefined));

  const order: readonly string[] = FSYNC_COUNT_IDS;
  return counts.sort((a, b) => order.indexOf(a.id) - order.indexOf(b.id));
}
