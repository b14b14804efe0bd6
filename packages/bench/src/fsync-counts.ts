import { join } from 'node:path';
import { ServiceCoordination } from '@leasehold/coordination';
import { PrivateFiles, type MutationStep } from '@leasehold/private-files';
import { CONFIG, boundEndpoint, documentBytes, type BenchPlace } from './fixtures.js';

// Item 7 of issue #6: the fsyncs each operation makes, seen through the
// beforeMutation hook (called before every mutating system call), and the
// minimum the protocol needs.

/** Why one fsync is made. */
export type FsyncReason =
  /** A staged file's (or staged folder's) contents, before a link or rename publishes it. */
  | 'contents-before-publication'
  /** The folder that a link, rename, unlink or mkdir changed, so the change survives a crash. */
  | 'publication'
  /** The registry folder right after `registry.lock` is linked: see `AVOIDABLE`. */
  | 'registry-lock-link';

/** The fsyncs the protocol does not need, with the argument. */
export const AVOIDABLE: Readonly<Partial<Record<FsyncReason, string>>> = {
  'registry-lock-link':
    'the registry folder fsync right after registry.lock is linked. It makes the lock durable while the ' +
    'transaction runs, which matters only if the machine crashes first, and then it is not needed: every ' +
    'holder is gone after a reboot and SPEC 8.3 keeps every crash state fenced with the lock deleted by hand. ' +
    'In the cycle, the roots.json replace that follows fsyncs the same folder anyway.',
};

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
export function fsyncReasons(steps: readonly MutationStep[]): FsyncReason[] {
  const reasons: FsyncReason[] = [];
  let published: MutationStep | undefined;
  steps.forEach((step, index) => {
    if (publishes(step)) published = step;
    if (step.action === 'fsync') reasons.push('contents-before-publication');
    if (step.action !== 'fsync-directory') return;
    // createFolder fsyncs the staged folder before its rename: contents, not a publication.
    if (step.operation === 'create-folder' && steps[index + 1]?.action === 'rename') reasons.push('contents-before-publication');
    else if (published?.action === 'link' && published.path.endsWith('/registry/registry.lock')) reasons.push('registry-lock-link');
    else reasons.push('publication');
    published = undefined;
  });
  return reasons;
}

/** Counts one run of `steps` for the operation `id`. */
export function countOf(id: string, label: string, steps: readonly MutationStep[]): FsyncCount {
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

/**
 * Runs each counted operation once with a recording hook, after a warm-up
 * that makes the folders every later call finds in place (the staging
 * folder, the registry, the workspaces folder).
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
  await measure('release.reused', 'release, reused workspace', () => reused.release());
  const order = ['files.create', 'files.replace', 'files.remove', 'files.read', 'acquire.fresh', 'release.fresh', 'acquire.reused', 'release.reused', 'inspect', 'local-access'];
  return counts.sort((a, b) => order.indexOf(a.id) - order.indexOf(b.id));
}
