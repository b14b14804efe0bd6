import {
  encode,
  fileSystemRemedy,
  placeOptions,
  sha256,
  shellQuote,
  type Inspection,
  type MarkedOwnership,
  type Verdict,
  type OwnerConfig,
  type OwnerSummary,
  type Ownership,
  type Recovery,
  snapshotInspection,
  type WatchSnapshot,
} from '@leasehold/contracts';
import { rootExists } from '@leasehold/recovery';
import { connect, settledInspection, type HandOverPending } from '@leasehold/transport';
import { allowanceOf, openStateHome } from '@leasehold/state-home';
import { withBackend } from '../backend.js';
import { refuseUnknownFolder, workspaceOf, type CommandContext } from '../context.js';
import { coveringOf } from '../covering.js';
import { fileSystemReport } from '../file-system-words.js';
import { table } from '../output.js';
import { wholeNumber } from '../options.js';
import { UsageError } from '../remedies.js';
import { outlivingProgramOf, programInWords, programRemedy, type ProgramRecord } from '../outliving-program.js';

/** Exit status of `status` when the workspace is not running. */
const NOT_RUNNING_EXIT = 3;

/**
 * Why a workspace is not `running` although its files name an owner, in words a script can match
 * (beside `reason`, the sentence): `served-elsewhere` (an owner on another host, on etcd),
 * `owned-elsewhere` (the folder, or one above it, is owned through another state home: `through`
 * names it; proved live over the transport, the report is `running` instead, with `through`),
 * `owner-gone` (its process is gone, as `list` and recovery judge it), `owner-not-answering` (its process is there, or
 * cannot be told from here, but it does not answer), `in-progress` (an acquire or release is
 * passing), `unreadable` (the files cannot be read as a state: see `leasehold doctor`),
 * `program-outlives-owner` (its owner is gone, but the program it fenced the workspace with, such
 * as `leasehold run`'s, lives on: `program` names it, and `leasehold stop` ends it).
 */
type ReasonCode =
  | 'served-elsewhere'
  | 'owned-elsewhere'
  | 'owner-gone'
  | 'owner-not-answering'
  | 'in-progress'
  | 'unreadable'
  | 'program-outlives-owner';

/** What `status` reports. */
export interface StatusReport {
  readonly status: 'running' | Inspection['status'];
  /** The workspace the answer is about: the folder asked about, or the fenced workspace it is inside. */
  readonly root: string;
  /** The folder asked about, when it is inside `root` rather than `root` itself. */
  readonly folder?: string;
  readonly epoch: string | null;
  readonly endpoint?: string;
  readonly pid?: number;
  /** The `compatibility` the owner publishes, when it does (`serveOwner({ compatibility })`). */
  readonly compatibility?: string;
  /** For an owner proved live: a hand-over it accepted and has not yet released (`leasehold stop --ask`). */
  readonly handOver?: HandOverPending;
  /** How many wait in line for the workspace (`serve --wait`, `acquire({ waitMs })`), when any do. */
  readonly waiting?: number;
  /** For an owner proved live: the file a client of this host reads the capability from (its path, never its content). */
  readonly capabilityFile?: string;
  /** The workspace's owner config, once one was published: what an upgrade (`--replace-config`) changes. */
  readonly config?: ConfigSummary;
  readonly reason?: string;
  readonly reasonCode?: ReasonCode;
  /** The program its gone owner fenced the workspace with, still running (`program-outlives-owner`). */
  readonly program?: ProgramRecord;
  /** The ownership of the folder through another state home, as its own mark names it (SPEC 5.1a). */
  readonly through?: MarkedOwnership;
  /** The fenced workspaces inside the folder, when it is above them: a serve of the folder would overlap them. */
  readonly inside?: ReadonlyArray<{ readonly root: string; readonly ownerStatus: Verdict }>;
}

/** A config by its identity (the SHA-256 of its canonical bytes, as the registry row records it) and its parts. */
interface ConfigSummary {
  readonly identity: string;
  readonly endpoint: string;
  readonly policyIdentity: string;
}

/**
 * The workspace's config in a report, or undefined when there is none or it cannot be read: the
 * status itself already says what is wrong with such a workspace.
 */
async function configOf(ownership: Ownership, root: string): Promise<ConfigSummary | undefined> {
  let config: OwnerConfig | undefined;
  try {
    config = await ownership.configuration(root);
  } catch {
    return undefined;
  }
  return config === undefined
    ? undefined
    : { identity: sha256(encode(config)), endpoint: config.endpoint, policyIdentity: config.policyIdentity };
}

/**
 * Files cannot prove that an owner is live; the transport can. `running`
 * only when `connect` resolves: the owner answered GET /v1/status,
 * authenticated with the capability, with the recorded epoch.
 */
async function challenge(root: string, ownership: Ownership): Promise<StatusReport | undefined> {
  try {
    const { epoch, endpoint, status } = await connect(root, { ownership });
    const compatibility = status.compatibility === undefined ? {} : { compatibility: status.compatibility };
    const handOver = status.handOver === undefined ? {} : { handOver: status.handOver };
    // Where `connect` read the capability: every backend keeps it in this host's files, and says where.
    const capabilityFile = ownership.capabilityFile(root);
    return { status: 'running', root, epoch, endpoint, pid: status.pid, ...compatibility, ...handOver, capabilityFile };
  } catch {
    return undefined;
  }
}

function reportOf(inspection: Inspection, root: string): StatusReport {
  switch (inspection.status) {
    case 'absent':
      return { status: 'absent', root, epoch: null };
    case 'stopped':
      return { status: 'stopped', root, epoch: inspection.epoch };
    case 'unavailable': {
      const { owner, reason } = inspection;
      const reasonCode: ReasonCode =
        inspection.inProgress === true ? 'in-progress' : owner === undefined ? 'unreadable' : 'owner-not-answering';
      return owner === undefined
        ? { status: 'unavailable', root, epoch: null, reason, reasonCode }
        : {
            status: 'unavailable',
            root,
            epoch: owner.epoch,
            endpoint: owner.endpoint,
            pid: owner.pid,
            reason,
            reasonCode,
          };
    }
    default:
      return {
        status: inspection.status,
        root,
        epoch: inspection.owner.epoch,
        endpoint: inspection.owner.endpoint,
        pid: inspection.owner.pid,
      };
  }
}

/** An owner the backend names but that did not answer: say whether its process is even there, or where it serves. */
function silentOwner(report: StatusReport, owner: OwnerSummary | undefined, elsewhere: boolean): StatusReport {
  if (owner === undefined || report.reasonCode === 'in-progress') return report;
  // An owner this host cannot see (another host's, on etcd) is out of its reach: the backend's reason says where it serves.
  if (elsewhere) return { ...report, reasonCode: 'served-elsewhere' };
  // The backend's verdict (pid, start time, boot, namespace): a zombie or a reused pid is gone, as `list` and recovery say.
  if (owner.process === 'absent')
    return {
      ...report,
      reason: `its owner (pid ${owner.pid}) does not answer: its process is gone`,
      reasonCode: 'owner-gone',
    };
  return { ...report, reason: `its owner (pid ${owner.pid}) does not answer`, reasonCode: 'owner-not-answering' };
}

/**
 * A report whose owner does not answer, with the program its owner fenced the workspace with when
 * that program outlived it (`leasehold run` and its watcher killed): that program, not a recovery,
 * is what is in the way. Another host's owner, or a passing state, is left as it is.
 */
async function withOutlivingProgram(report: StatusReport, recovery: Recovery): Promise<StatusReport> {
  if (report.pid === undefined || report.reasonCode === 'served-elsewhere' || report.reasonCode === 'in-progress')
    return report;
  const program = await outlivingProgramOf(recovery, report.root);
  if (program === undefined) return report;
  const reason = `its owner (pid ${report.pid}) is gone, but the program it fenced the workspace with lives on`;
  return { ...report, reason, reasonCode: 'program-outlives-owner', program: program.record };
}

/** The next thing a person might do, for each status: a command that works in that state. */
function nextStep(report: StatusReport, stateHome: string): string {
  const { root } = report;
  // A folder owned through another state home is stopped or recovered there.
  const options = placeOptions(root, report.through?.stateHome ?? stateHome);
  if (report.program !== undefined)
    return `Its owner's process is gone, but the program it ran lives on; ${programRemedy(report.program, root, stateHome)}`;
  if (report.inside !== undefined) {
    const [first] = report.inside;
    return `Workspaces inside this folder are registered, so a serve of it would overlap them; ask about one with: leasehold status ${placeOptions(first!.root, stateHome)}`;
  }
  switch (report.status) {
    case 'running':
      return `Stop it with: leasehold stop ${options}`;
    case 'absent':
    case 'stopped':
      return rootExists(root)
        ? `Start it with: leasehold serve ${options}`
        : `No folder is at ${root}: pass an existing one with --workspace.`;
    case 'stopping':
      return 'It is stopping; check again in a moment.';
    case 'quarantined':
      return `Its owner is quarantined; review what it left with: leasehold recover ${options}`;
    default:
      return nextForUnavailable(report, options, stateHome);
  }
}

/** What to do about a folder owned through another state home: ask there, or recover there once its owner is gone. */
function ownedElsewhereStep(marked: MarkedOwnership): string {
  const there = placeOptions(marked.root, marked.stateHome);
  const asUser = marked.uid === process.geteuid?.() ? '' : ` (as ${marked.user}, whose mark it is)`;
  if (marked.process === 'absent')
    return `Its owner through another state home is gone; review what it left with: leasehold recover ${placeOptions(marked.root, marked.recoverIn)}${asUser}`;
  return `It is owned through another state home; ask there with: leasehold status ${there}${asUser}`;
}

function nextForUnavailable(report: StatusReport, options: string, stateHome: string): string {
  switch (report.reasonCode) {
    // An owner on another host (etcd) is reached from that host only: its capability never leaves it.
    case 'served-elsewhere':
      return 'It is served on another host: ask there with leasehold status, or stop it there with leasehold stop.';
    case 'owned-elsewhere':
      return ownedElsewhereStep(report.through!);
    case 'owner-gone':
      return `Its owner's process is gone; review what it left with: leasehold recover ${options}`;
    case 'owner-not-answering':
      return `Its owner's process is still there: wait and ask again, or end that process (pid ${report.pid}), then: leasehold recover ${options}`;
    case 'in-progress':
      return 'An acquire or release is passing; check again in a moment.';
    default:
      return `Its files cannot be read as a state: leasehold doctor --state-home ${shellQuote(stateHome)}`;
  }
}

/**
 * `leasehold status`: inspect, plus the transport challenge when the files name an owner. Run
 * inside a fenced workspace, it answers about that workspace (as git finds its root); run above
 * fenced workspaces, it names them.
 */
export async function status(context: CommandContext): Promise<number> {
  const folder = workspaceOf(context, true);
  const pollMs = wholeNumber(context.values['poll-ms'], '--poll-ms', 10);
  if (pollMs !== undefined && context.values.watch !== true)
    throw new UsageError('--poll-ms: only with --watch', 'add --watch, or leave --poll-ms out');
  return withBackend(context, async ({ ownership, recovery, stateHome, host }) => {
    const asked = await settledInspection(ownership, folder);
    refuseUnknownFolder(folder, asked);
    const { root, inside } = await coveringOf(ownership, folder, asked);
    if (context.values.watch === true) return watched(context, { ownership, recovery }, root, host, pollMs);
    const report = {
      ...(await statusOf({ ownership, recovery }, root, host, root === folder ? asked : undefined)),
      ...(root === folder ? {} : { folder }),
      ...(inside.length === 0
        ? {}
        : { inside: inside.map((entry) => ({ root: entry.root, ownerStatus: entry.verdict })) }),
    };
    return reported(context, stateHome, report);
  });
}

/**
 * What `status` answers of one workspace root (`list` says the same of each): the files' state,
 * proved over the transport when they name an owner, a program that outlived a gone owner, and
 * the owner config. `inspection` when it was just taken; `host` this host's name on etcd.
 */
export async function statusOf(
  { ownership, recovery }: { readonly ownership: Ownership; readonly recovery: Recovery },
  root: string,
  host: string | undefined,
  inspection?: Inspection,
): Promise<StatusReport> {
  const state = inspection ?? (await settledInspection(ownership, root));
  if (state.status === 'unavailable' && state.marked !== undefined) return throughAnother(state.marked, state.reason);
  const owner = state.status === 'unavailable' ? state.owner : undefined;
  const answered = owner === undefined ? undefined : await challenge(root, ownership);
  const elsewhere = answered === undefined && owner !== undefined && host !== undefined && owner.host !== host;
  const config = await configOf(ownership, root);
  const waiting = await waitingFor(ownership, root);
  const report =
    answered ?? (await withOutlivingProgram(silentOwner(reportOf(state, root), owner, elsewhere), recovery));
  return { ...report, ...(waiting === 0 ? {} : { waiting }), ...(config === undefined ? {} : { config }) };
}

/**
 * A folder owned through another state home, as its mark names it: `running` when that state
 * home's owner answers over the transport (its capability is in that state home, which this user
 * may read, as root under sudo may), else `unavailable` with the mark's owner.
 */
async function throughAnother(marked: MarkedOwnership, reason: string): Promise<StatusReport> {
  const base = { root: marked.root, epoch: marked.epoch, pid: marked.pid, through: marked };
  if (marked.process === 'live') {
    try {
      const there = await openStateHome(marked.stateHome);
      try {
        const answered = await challenge(marked.root, there.ownership);
        if (answered !== undefined) return { ...answered, through: marked };
      } finally {
        await there.close();
      }
    } catch {
      // That state home cannot be opened from here: the mark is what there is to say.
    }
  }
  return { status: 'unavailable', ...base, reason, reasonCode: 'owned-elsewhere' };
}

/** How many wait in line; 0 when the line cannot be read (the status itself is what this command answers). */
async function waitingFor(ownership: Ownership, root: string): Promise<number> {
  try {
    return await ownership.waiters(root);
  } catch {
    return 0;
  }
}

/** Another state home's ownership for a person: `state home /root/.local/state/leasehold, as root (uid 0)`. */
function throughInWords({ stateHome, backend, user }: MarkedOwnership): string {
  return `state home ${stateHome}${backend === 'etcd' ? ' (etcd)' : ''}, as ${user}`;
}

/** A pending hand-over for a person: `asked: releases after its current work (reason: …)`. */
function handOverInWords({ decision, reason }: HandOverPending): string {
  const when = decision === 'release' ? 'releases now' : 'releases after its current work';
  return `asked: ${when}${reason === undefined ? '' : ` (reason: ${reason})`}`;
}

function reported(context: CommandContext, stateHome: string, report: StatusReport): number {
  const { output } = context;
  const fileSystem = fileSystemReport(stateHome);
  output.record({ ...report, stateHome, fileSystem: fileSystem.record });
  const rows: Array<[string, string]> = [[report.status, report.root]];
  if (report.folder !== undefined) rows.push(['folder', `${report.folder} (inside this workspace)`]);
  if (report.endpoint !== undefined) rows.push(['endpoint', report.endpoint]);
  if (report.epoch !== null) rows.push(['epoch', report.epoch]);
  if (report.pid !== undefined) rows.push(['pid', String(report.pid)]);
  if (report.compatibility !== undefined) rows.push(['compatibility', report.compatibility]);
  if (report.handOver !== undefined) rows.push(['hand-over', handOverInWords(report.handOver)]);
  if (report.waiting !== undefined)
    rows.push(['waiting', `${report.waiting} in line for it, first come, first served`]);
  if (report.config !== undefined)
    rows.push(['config', `${report.config.identity.slice(0, 12)} (endpoint ${report.config.endpoint})`]);
  if (report.through !== undefined) rows.push(['through', throughInWords(report.through)]);
  if (report.reason !== undefined) rows.push(['reason', report.reason]);
  if (report.program !== undefined) rows.push(['program', programInWords(report.program)]);
  for (const entry of report.inside ?? []) rows.push(['inside', `${entry.root} (owner ${entry.ownerStatus})`]);
  rows.push(['state home', `${stateHome}, on ${fileSystem.words}`]);
  const { proven, allowed } = fileSystem.record;
  // Every read of a state home on a file system it does not allow is refused: that is the step.
  const next =
    proven || allowed
      ? nextStep(report, stateHome)
      : `Its state home is refused where it is: ${fileSystemRemedy(stateHome, allowanceOf(fileSystem.record).name, 'state home')}`;
  output.say(...table(rows), '', next);
  return report.status === 'running' ? 0 : NOT_RUNNING_EXIT;
}

/** The signals that end `status --watch`. */
const WATCH_END_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * `leasehold status --watch`: a line per change of what `status` answers for `root`, until SIGINT,
 * SIGTERM or SIGHUP (exit 0). Each change the backend's watch delivers is told as `status` tells it
 * (an owner proved over the transport is `running`); an owner that does not answer yet is asked
 * again every poll, since its starting to answer changes no file. A line after a gap says so.
 */
async function watched(
  context: CommandContext,
  backend: { readonly ownership: Ownership; readonly recovery: Recovery },
  root: string,
  host: string | undefined,
  pollMs: number | undefined,
): Promise<number> {
  const ended = new AbortController();
  const end = (): void => ended.abort();
  for (const signal of WATCH_END_SIGNALS) process.on(signal, end);
  let last: StatusReport | undefined;
  let seq = 0;
  const show = async (snapshot: WatchSnapshot | undefined): Promise<void> => {
    // The snapshot's own answer, not a read of now: a read now could pass over the state it saw.
    const report = await statusOf(
      backend,
      root,
      host,
      snapshot === undefined ? undefined : snapshotInspection(snapshot),
    );
    const resync = snapshot?.resync === true;
    if (ended.signal.aborted || (!resync && JSON.stringify(report) === JSON.stringify(last))) return;
    last = report;
    seq += 1;
    context.output.record({ seq, ...report, ...(resync ? { resync: true } : {}) });
    context.output.say(watchLine(seq, report, resync));
  };
  // The changes come in turn: one report at a time, in the order they were seen.
  let turn = Promise.resolve();
  const next = (snapshot: WatchSnapshot | undefined): void => {
    turn = turn.then(() => show(snapshot));
  };
  const recheck = setInterval(() => {
    if (last?.reasonCode === 'owner-not-answering') next(undefined);
  }, pollMs ?? 1000);
  try {
    const options = { signal: ended.signal, ...(pollMs === undefined ? {} : { pollMs }) };
    for await (const snapshot of backend.ownership.watch(root, options)) next(snapshot);
    await turn;
    return 0;
  } finally {
    clearInterval(recheck);
    for (const signal of WATCH_END_SIGNALS) process.off(signal, end);
  }
}

/** One line of `status --watch` for a person: the time, the state and who holds it. */
function watchLine(seq: number, report: StatusReport, resync: boolean): string {
  const parts = [new Date().toISOString().slice(11, 19), `#${seq}`, report.status];
  if (report.pid !== undefined) parts.push(`pid ${report.pid}`);
  if (report.epoch !== null) parts.push(`epoch ${report.epoch}`);
  // A passing state's reason is the rule it breaks for a moment; a person needs only that it passes.
  if (report.reasonCode === 'in-progress') parts.push('(an acquire or release is passing)');
  else if (report.reason !== undefined) parts.push(`(${report.reason})`);
  if (report.waiting !== undefined) parts.push(`${report.waiting} waiting`);
  if (resync) parts.push('[read afresh: changes before this one may have been missed]');
  return parts.join('  ');
}
