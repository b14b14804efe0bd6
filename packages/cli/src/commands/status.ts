import { encode, sha256, type Inspection, type OwnerConfig, type OwnerSummary, type Ownership } from '@leasehold/contracts';
import { ownerStatus } from '@leasehold/private-files';
import { connect, settledInspection } from '@leasehold/transport';
import { withBackend } from '../backend.js';
import { placeOptions, rootExists, workspaceOf, type CommandContext } from '../context.js';
import { table } from '../output.js';

/** Exit status of `status` when the workspace is not running. */
const NOT_RUNNING_EXIT = 3;

/** What `status` reports. */
interface StatusReport {
  readonly status: 'running' | Inspection['status'];
  readonly epoch: string | null;
  readonly endpoint?: string;
  readonly pid?: number;
  readonly reason?: string;
  /** The `compatibility` the owner publishes, when it does (`serveOwner({ compatibility })`). */
  readonly compatibility?: string;
  /** The workspace's owner config, once one was published: what an upgrade (`--replace-config`) changes. */
  readonly config?: ConfigSummary;
}

/** A config by its identity (the SHA-256 of its canonical bytes, as the registry row records it) and its parts. */
export interface ConfigSummary {
  readonly identity: string;
  readonly endpoint: string;
  readonly policyIdentity: string;
}

/**
 * The workspace's config in a report, or undefined when there is none or it cannot be read: the
 * status itself already says what is wrong with such a workspace.
 */
export async function configOf(ownership: Ownership, root: string): Promise<ConfigSummary | undefined> {
  let config: OwnerConfig | undefined;
  try {
    config = await ownership.configuration(root);
  } catch {
    return undefined;
  }
  return config === undefined ? undefined : { identity: sha256(encode(config)), endpoint: config.endpoint, policyIdentity: config.policyIdentity };
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
    return { status: 'running', epoch, endpoint, pid: status.pid, ...compatibility };
  } catch {
    return undefined;
  }
}

function reportOf(inspection: Inspection): StatusReport {
  switch (inspection.status) {
    case 'absent':
      return { status: 'absent', epoch: null };
    case 'stopped':
      return { status: 'stopped', epoch: inspection.epoch };
    case 'unavailable': {
      const owner = inspection.owner;
      return owner === undefined
        ? { status: 'unavailable', epoch: null, reason: inspection.reason }
        : { status: 'unavailable', epoch: owner.epoch, endpoint: owner.endpoint, pid: owner.pid, reason: inspection.reason };
    }
    default:
      return { status: inspection.status, epoch: inspection.owner.epoch, endpoint: inspection.owner.endpoint, pid: inspection.owner.pid };
  }
}

/** An owner the backend names but that did not answer: say whether its process is even there. */
function silentOwner(report: StatusReport, owner: OwnerSummary | undefined): StatusReport {
  if (owner === undefined) return report;
  const liveness = ownerStatus(owner.pid, owner.host);
  // An owner this host cannot see (another host's, on etcd) is out of its reach: the backend's reason says where it serves.
  if (liveness === 'ambiguous') return report;
  return { ...report, reason: `its owner (pid ${owner.pid}) does not answer${liveness === 'absent' ? ' and is gone: it crashed' : ''}` };
}

/** The next thing a person might do, for each status. */
function nextStep(report: StatusReport, root: string, options: string, elsewhere: boolean): string {
  switch (report.status) {
    case 'running':
      return `Stop it with: leasehold stop ${options}`;
    case 'absent':
    case 'stopped':
      return rootExists(root) ? `Start it with: leasehold serve ${options}` : `No folder is at ${root}: pass an existing one with --workspace.`;
    case 'stopping':
      return 'It is stopping; check again in a moment.';
    default:
      // An owner on another host (etcd) is reached from that host only: its capability never leaves it.
      if (elsewhere) return 'It is served on another host: ask there with leasehold status, or stop it there with leasehold stop.';
      return `If its owner crashed, see: leasehold recover ${options}`;
  }
}

/** `leasehold status`: inspect, plus the transport challenge when access material exists. */
export async function status(context: CommandContext): Promise<number> {
  const root = workspaceOf(context, true);
  return withBackend(context, async ({ ownership, stateHome, host }) => {
    const inspection = await settledInspection(ownership, root);
    const owner = inspection.status === 'unavailable' ? inspection.owner : undefined;
    const answered = owner === undefined ? undefined : await challenge(root, ownership);
    const elsewhere = answered === undefined && owner !== undefined && host !== undefined && owner.host !== host;
    const config = await configOf(ownership, root);
    const report = answered ?? silentOwner(reportOf(inspection), owner);
    return reported(context, root, stateHome, config === undefined ? report : { ...report, config }, elsewhere);
  });
}

function reported(context: CommandContext, root: string, stateHome: string, report: StatusReport, elsewhere: boolean): number {
  const { output } = context;
  output.record({ ...report });
  const rows: Array<[string, string]> = [[report.status, root]];
  if (report.endpoint !== undefined) rows.push(['endpoint', report.endpoint]);
  if (report.epoch !== null) rows.push(['epoch', report.epoch]);
  if (report.pid !== undefined) rows.push(['pid', String(report.pid)]);
  if (report.compatibility !== undefined) rows.push(['compatibility', report.compatibility]);
  if (report.config !== undefined) rows.push(['config', `${report.config.identity.slice(0, 12)} (endpoint ${report.config.endpoint})`]);
  if (report.reason !== undefined) rows.push(['reason', report.reason]);
  output.say(...table(rows), '', nextStep(report, root, placeOptions(root, stateHome), elsewhere));
  return report.status === 'running' ? 0 : NOT_RUNNING_EXIT;
}
