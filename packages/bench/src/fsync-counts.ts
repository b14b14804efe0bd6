import { fork } from 'node:child_process';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ServiceCoordination } from '@leasehold/coordination';
import { PrivateFiles, type MutationStep } from '@leasehold/private-files';
import { recover, recoverySnapshot } from '@leasehold/recovery';
import { Registry, TAKEOVER_MARKER } from '@leasehold/registry';
import { CONFIG, boundEndpoint, documentBytes, type BenchPlace } from './fixtures.js';

// Item 7 of issue #6 and the fsync row of issue #9: the fsyncs each operation
// makes, seen through the beforeMutation hook (called before every mutating
// system call), and the minimum the protocol needs.

const CRASH_WORKER = fileURLToPath(new URL('./crash-worker.js', import.meta.url));

/** Why one fsync is made. */
export type FsyncReason =
  /** A staged file's (or staged folder's) contents, before a link or rename publishes it. */
  | 'contents-before-publication'
  /** The folder that a link, rename, unlink or mkdir changed, so the change survives a crash. */
  | 'publication'
  /** The registry folder right after `registry.lock` or a take-over marker is linked or renamed into place: see `AVOIDABLE`. */
  | 'registry-lock-link'
  /** The registry folder right after `registry.lock` or a take-over marker is unlinked: see `AVOIDABLE`. */
  | 'registry-lock-removal';

/** The fsyncs the protocol does not need, with the argument. */
export const AVOIDABLE: Readonly<Partial<Record<FsyncReason, string>>> = {
  'registry-lock-link':
    'the registry folder fsync right after registry.lock (or a take-over marker) is linked or renamed into place. ' +
    'Whether the lock survives a crash does not matter: after a crash its holder is gone, and a lock whose holder ' +
    'is gone is taken over by the next writer, so the lock is never a fence (SPEC 1.2, 4). Its contents fsync stays: a ' +
    'later folder fsync (the roots.json replace) can make the link durable, and a torn lock reads as refused.',
  'registry-lock-removal':
    'the registry folder fsync right after registry.lock (or a take-over marker) is unlinked. A removal lost in a ' +
    'crash brings back a lock whose holder is gone, which the next writer takes over; nothing the transaction wrote ' +
    'depends on it (an unlink whose folder fsync fails already counts as removed).',
};

/** Whether `path` is the registry lock or a take-over marker (in the registry folder). */
function isRegistryLock(path: string): boolean {
  const name = basename(path);
  return basename(dirname(path)) === 'registry' && (name === 'registry.lock' || TAKEOVER_MARKER.test(name));
}

/** The fsyncs of one operation. */
export interface FsyncCount {
  readonly id: string;
  readonly label: string;
  /** fsync of a file (a staged temp). */
  readonly file: number;
  /** fsync of a folder. */
  readonly folder: number;
  readonly total: number;
  /** Durable publications: links, renames, removals and folder creations. */
  readonly publications: number;
  /** The publications by kind: what their exact floor is made of. */
  readonly kinds: { readonly create: number; readonly replace: number; readonly remove: number; readonly folder: number };
  /** What the protocol needs: `total` less the avoidable ones. */
  readonly minimum: number;
  /** Each avoidable fsync's reason. */
  readonly avoidable: readonly FsyncReason[];
}

/** Whether a step publishes an entry durably (its folder is fsynced after it). */
function publishes(step: MutationStep): boolean {
  if (step.action === 'link' || step.action === 'rename') return true;
  if (step.operation === 'remove' && step.action === 'unlink') return true;
  return step.operation === 'directory' && step.action === 'mkdir';
}

/** The reason of each fsync in `steps`. */
function fsyncReasons(steps: readonly MutationStep[]): FsyncReason[] {
  const reasons: FsyncReason[] = [];
  let published: MutationStep | undefined;
  steps.forEach((step, index) => {
    if (publishes(step)) published = step;
    if (step.action === 'fsync') reasons.push('contents-before-publication');
    if (step.action !== 'fsync-directory') return;
    // createFolder fsyncs the staged folder before its rename: contents, not a publication.
    if (step.operation === 'create-folder' && steps[index + 1]?.action === 'rename') reasons.push('contents-before-publication');
    else if (published !== undefined && isRegistryLock(published.path)) {
      reasons.push(published.action === 'unlink' ? 'registry-lock-removal' : 'registry-lock-link');
    } else reasons.push('publication');
    published = undefined;
  });
  return reasons;
}

/** Counts one run of `steps` for the operation `id`. */
function countOf(id: string, label: string, steps: readonly MutationStep[]): FsyncCount {
  const reasons = fsyncReasons(steps);
  const avoidable = reasons.filter((reason) => AVOIDABLE[reason] !== undefined);
  const file = steps.filter((step) => step.action === 'fsync').length;
  const folder = steps.filter((step) => step.action === 'fsync-directory').length;
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
    minimum: file + folder - avoidable.length,
    avoidable,
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
