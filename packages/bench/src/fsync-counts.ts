import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { acquireWorkspace, inspectWorkspace, openWorkspace, workspaceLocalAccess } from '@leasehold/coordination';
import { PrivateFiles, type MutationStep } from '@leasehold/private-files';
import { fileRecovery } from '@leasehold/recovery';
import { Registry, currentProcess } from '@leasehold/registry';
import { stateHomeLayout, type Reservation } from '@leasehold/contracts';
import { PROVED_FSYNCS, fsyncBounds, type PowerLossProtocol } from '@leasehold/test-utils';
import { CONFIG, boundEndpoint, documentBytes, type BenchPlace } from './fixtures.js';

// Section 7: the fsyncs each operation makes, seen through the
// beforeMutation hook (called before every mutating system call), against
// the previous release's count and against the fewest the power-loss
// exploration proved the operation needs.

const CRASH_WORKER = fileURLToPath(new URL('./crash-worker.js', import.meta.url));

/** What the previous release did that this one does not, and where the proof that it was not needed is. */
export const FSYNC_PROOF =
  'the previous release fsynced the folder after every publication; this one skips it (private-files PublishOptions { syncFolder: false }) ' +
  'right after registry.lock is linked and unlinked (registry LOCK_PUBLISH); in an acquire, after owner.lock is published, whose folder ' +
  "the capability's publication fsyncs next; in a release and a recovery, after the registration is written stopped and the capability " +
  'removed, whose folder owner.lock\'s removal fsyncs next (docs/persistence.md, "Publishing without the folder fsync"). ' +
  'packages/recovery/src/power-loss.test.ts explores every crash state of all six protocols without them and finds nothing.';

/** What "proved minimum" means, for the report. */
export const FSYNC_MINIMUM =
  'the fewest fsyncs the power-loss exploration proved the same operation needs (PROVED_FSYNCS of @leasehold/test-utils, which ' +
  'packages/recovery/src/power-loss*.test.ts asserts): each fsync dropped alone (needed when a state then breaks), then the others ' +
  'dropped one by one while every state still holds; a range lower..upper where that could not settle it. "-": not one of the explored protocols.';

/** The counted operations that are, step for step, a protocol the power-loss exploration records (the bench test checks the counts agree). */
const EXPLORED: Readonly<Record<string, PowerLossProtocol>> = {
  'acquire.first': 'acquire-fresh',
  'acquire.reused': 'acquire-stopped',
  phase: 'phase',
  'release.fresh': 'release',
  'release.reused': 'release',
  'recovery.first': 'recover',
  'registry.reservation': 'transaction',
};

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
  readonly kinds: {
    readonly create: number;
    readonly replace: number;
    readonly remove: number;
    readonly folder: number;
  };
  /** The publications that no folder fsync of their own call followed (see `FSYNC_PROOF`). */
  readonly unsynced: number;
  /**
   * The publications in order, space-separated: `c` create, `r` replace, `d` remove, `m` folder;
   * upper case when the same call fsynced the folder after it; `lock:` or `table:` on the registry's
   * lock or table. The bare contention floor (section 6) replays the reused cycle's.
   */
  readonly sequence: string;
  /** What the previous release made for the same operation: `total` plus one folder fsync per `unsynced`. */
  readonly previousRelease: number;
  /** The explored protocol this operation is, and the bounds its exploration proved (see `FSYNC_MINIMUM`). */
  readonly proved?: {
    readonly protocol: PowerLossProtocol;
    readonly fsyncs: number;
    readonly lower: number;
    readonly upper: number;
  };
}

/** Whether a step publishes an entry durably (its folder is fsynced after it, unless asked not to be). */
function publishes(step: MutationStep): boolean {
  if (step.action === 'link' || step.action === 'rename') return true;
  if (step.operation === 'remove' && step.action === 'unlink') return true;
  return step.operation === 'directory' && step.action === 'mkdir';
}

/** Whether the publication `steps[index]` was not followed, in the same call, by a fsync of its folder. */
function unsyncedAt(steps: readonly MutationStep[], index: number): boolean {
  const step = steps[index]!;
  // The rest of the same call: the steps up to the next one of another operation or the next publication.
  for (const later of steps.slice(index + 1)) {
    if (later.operation !== step.operation || publishes(later)) return true;
    if (later.action === 'fsync-directory' && later.path === dirname(step.path)) return false;
  }
  return true;
}

/** The letter of `FsyncCount.sequence` for the kind of publication a publishing step is. */
function kindLetter(step: MutationStep): string {
  if (step.action === 'link') return 'c';
  if (step.action === 'unlink') return 'd';
  if (step.action === 'rename' && step.operation !== 'create-folder') return 'r';
  return 'm';
}

/** The registry's lock and table in a state home, which the bare contention floor replays on a shared lock and table. */
interface RegistryPaths {
  readonly lock: string;
  readonly table: string;
}

/** `steps`' publications in order, as `FsyncCount.sequence` writes them. */
function sequenceOf(steps: readonly MutationStep[], registry: RegistryPaths): string {
  return steps
    .flatMap((step, index) => {
      if (!publishes(step)) return [];
      const letter = kindLetter(step);
      const token = unsyncedAt(steps, index) ? letter : letter.toUpperCase();
      const on = step.path === registry.lock ? 'lock:' : step.path === registry.table ? 'table:' : '';
      return [`${on}${token}`];
    })
    .join(' ');
}

/** Counts one run of `steps` for the operation `id`. */
function countOf(id: string, label: string, steps: readonly MutationStep[], registry: RegistryPaths): FsyncCount {
  const file = steps.filter((step) => step.action === 'fsync').length;
  const folder = steps.filter((step) => step.action === 'fsync-directory').length;
  const unsynced = steps.filter((step, index) => publishes(step) && unsyncedAt(steps, index)).length;
  const protocol = EXPLORED[id];
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
      folder: steps.filter(
        (step) =>
          (step.operation === 'directory' && step.action === 'mkdir') ||
          (step.operation === 'create-folder' && step.action === 'rename'),
      ).length,
    },
    unsynced,
    sequence: sequenceOf(steps, registry),
    previousRelease: file + folder + unsynced,
    ...(protocol === undefined
      ? {}
      : { proved: { protocol, fsyncs: PROVED_FSYNCS[protocol].fsyncs, ...fsyncBounds(PROVED_FSYNCS[protocol]) } }),
  };
}

/** A reservation of `root` as an owner of this process would make it, for a transaction to reserve on its own. */
function reservationOf(root: string, stateHome: string, configIdentity: string): Reservation {
  const { pid, host, processStart } = currentProcess();
  return {
    root,
    stateHome,
    configIdentity,
    endpoint: boundEndpoint(),
    epoch: randomUUID(),
    pid,
    host,
    ...(processStart === undefined ? {} : { processStart }),
    ownerToken: randomUUID(),
  };
}

/** Runs the crash worker in `mode` to its end: it dies holding what `mode` says. */
function crash(mode: 'owner' | 'registry-writer', stateHome: string, workspace: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = fork(CRASH_WORKER, [mode, stateHome, workspace, boundEndpoint()], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child.once('error', reject);
    child.once('exit', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`crash worker (${mode}) exited ${signal ?? code}`)),
    );
  });
}

/** The ids of every count, in the order they are printed. */
const FSYNC_COUNT_IDS = [
  'files.create',
  'files.replace',
  'files.remove',
  'files.read',
  'acquire.first',
  'acquire.fresh',
  'release.fresh',
  'acquire.reused',
  'phase',
  'release.reused',
  'recovery.first',
  'recovery',
  'registry.transaction',
  'registry.reservation',
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
  const stateHome = join(place.root, 'state-counted');
  const layout = stateHomeLayout(stateHome);
  const registryPaths = { lock: layout.registryLock, table: layout.roots };
  const measure = async <T>(id: string, label: string, action: () => T | Promise<T>): Promise<T> => {
    steps = [];
    const result = await action();
    counts.push(countOf(id, label, steps, registryPaths));
    return result;
  };

  const bytes = documentBytes();
  const files = new PrivateFiles(place.folder('counted-files'), { hooks });
  const documents = place.folder('counted-files', 'documents');
  files.create(join(documents, 'warm-up'), bytes);
  const created = await measure('files.create', 'private-files create', () =>
    files.create(join(documents, 'counted'), bytes),
  );
  const replaced = await measure('files.replace', 'private-files replace', () =>
    files.replace(join(documents, 'counted'), created, bytes),
  );
  await measure('files.read', 'private-files read', () => files.read(join(documents, 'counted')));
  await measure('files.remove', 'private-files remove', () => files.remove(join(documents, 'counted'), replaced));

  const options = { stateHome, hooks };
  const first = openWorkspace(place.workspace(), options);
  await (
    await measure('acquire.first', 'acquire, fresh workspace in a fresh state home', () =>
      acquireWorkspace(first, CONFIG, boundEndpoint()),
    )
  ).release();

  const workspace = openWorkspace(place.workspace(), options);
  const endpoint = boundEndpoint();
  const fresh = await measure('acquire.fresh', 'acquire, fresh workspace', () =>
    acquireWorkspace(workspace, CONFIG, endpoint),
  );
  await measure('release.fresh', 'release, fresh workspace', () => fresh.release());
  const reused = await measure('acquire.reused', 'acquire, reused workspace', () =>
    acquireWorkspace(workspace, CONFIG, endpoint),
  );
  await measure('inspect', 'inspect() of a held workspace', () => inspectWorkspace(workspace));
  await measure('local-access', 'localAccess() of a held workspace', () => workspaceLocalAccess(workspace));
  await measure('phase', 'phase(stopping), reused workspace', () => reused.phase('stopping'));
  await measure('release.reused', 'release, reused workspace (from stopping)', () => reused.release());

  // Recovery of an owner that died holding its workspace: the state home's first (it makes the journal folder), then another.
  const assertAuthority = () => undefined;
  const recoveries = [
    ['recovery.first', "recover() of a dead owner, the state home's first"],
    ['recovery', 'recover() of a dead owner'],
  ] as const;
  for (const [id, label] of recoveries) {
    const crashed = place.workspace();
    await crash('owner', stateHome, crashed);
    const { digest } = await fileRecovery({ stateHome }).view(crashed);
    const outcome = await measure(id, label, () =>
      fileRecovery({ stateHome, hooks }).recover(crashed, { expectedDigest: digest, assertAuthority }),
    );
    if (!outcome.recovered) throw new Error('fsync count: the crashed owner had nothing to recover');
  }

  // A registry transaction that writes nothing, one that reserves a root beside another's row, then one after a writer died inside one.
  const registry = new Registry(stateHome, { hooks });
  const root = place.workspace();
  await measure('registry.transaction', 'registry transaction, nothing written', () =>
    registry.transaction(root, () => undefined),
  );
  const reserved = reservationOf(place.workspace(), stateHome, reused.registration.configIdentity);
  await measure('registry.reservation', 'registry transaction, one reservation', () =>
    registry.transaction(reserved.root, (transaction) => transaction.reserve(reserved)),
  );
  await registry.transaction(reserved.root, (transaction) => transaction.unreserve(reserved.root, reserved.epoch));
  await crash('registry-writer', stateHome, place.workspace());
  await measure('registry.takeover', 'registry transaction, a dead writer’s lock taken over', () =>
    registry.transaction(root, () => undefined),
  );

  const order: readonly string[] = FSYNC_COUNT_IDS;
  return counts.sort((a, b) => order.indexOf(a.id) - order.indexOf(b.id));
}
