import { summarize, type Summary } from './statistics.js';

/** One part of a baseline: a series' median, `times` over. */
interface BaselinePart {
  readonly series: string;
  readonly times: number;
}

/** How one figure is computed: a series against a baseline from the same run. */
export interface FigureSpec {
  readonly id: string;
  readonly section: string;
  readonly series: string;
  readonly baseline: readonly BaselinePart[];
  /** A shorter name for a baseline of several parts. */
  readonly baselineLabel?: string;
  /** The largest ratio accepted (the README's "Targets, each judged against a floor of the same run"), when there is a target. */
  readonly target?: number;
  /** What the closing table calls the target, when the two labels are too long to say it. */
  readonly targetName?: string;
  /**
   * A figure of the same run whose ratio is this one's floor (the machine's bare parallel floor):
   * the target then judges this ratio / that ratio.
   */
  readonly floorFigure?: string;
  readonly note?: string;
}

/** A ratio judged against another figure's ratio of the same run (`FigureSpec.floorFigure`). */
export interface JudgedRatio {
  /** The floor's figure id, what it compares and its ratio. */
  readonly floor: string;
  readonly label: string;
  readonly floorRatio: number;
  /** The figure's ratio / the floor's: what the target judges. */
  readonly ratio: number;
}

/** One row of the table: a series' median and p99, its baseline's median, and their ratio. */
export interface Figure {
  readonly id: string;
  readonly section: string;
  readonly label: string;
  readonly median: number;
  readonly p99: number;
  readonly samples: number;
  readonly baseline: { readonly label: string; readonly median: number; readonly p99: number };
  /** median / baseline median. */
  readonly ratio: number;
  readonly target: number | null;
  /** What the closing table calls the target: `targetName`, or the figure against its baseline. */
  readonly targetName: string | null;
  /** When the target judges the ratio against another figure's ratio: that one, and the quotient judged. */
  readonly judged: JudgedRatio | null;
  /** Whether the judged ratio (the quotient, or the ratio itself) is within the target. */
  readonly met: boolean | null;
  readonly note: string | null;
}

const SECTIONS = {
  floors: '1. Floors (plain node:fs)',
  files: '2. private-files against the floors and its peers',
  cycle: '3. Ownership cycle',
  hot: '4. Hot paths',
  scale: '5. Scale (reservations already in the registry)',
  contention: '6. Contention (16 processes, 16 disjoint roots, one state home, default lock wait)',
} as const;

const part = (series: string, times = 1): BaselinePart => ({ series, times });

/** Cycle publications (from the fsync count) that make its floor. */
export interface CyclePublications {
  readonly fresh: number;
  readonly reused: number;
  /** The reused cycle's publications by kind, and how many of them skip their folder fsync. */
  readonly reusedKinds: {
    readonly create: number;
    readonly replace: number;
    readonly remove: number;
    readonly unsynced: number;
  };
}

/** Every figure of sections 1 to 6, with their targets. */
export function figureSpecs(publications: CyclePublications, processes: number): FigureSpec[] {
  const { floors, files, cycle, hot, scale, contention } = SECTIONS;
  const bothFsyncs = [part('floor.fsync-file'), part('floor.fsync-folder')];
  const bothLabel = 'the two fsyncs above (file + folder)';
  return [
    { id: 'floor.fsync-file', section: floors, series: 'floor.fsync-file', baseline: [part('fs.write')] },
    { id: 'floor.fsync-folder', section: floors, series: 'floor.fsync-folder', baseline: [part('fs.write')] },
    { id: 'floor.create', section: floors, series: 'floor.create', baseline: bothFsyncs, baselineLabel: bothLabel },
    { id: 'floor.replace', section: floors, series: 'floor.replace', baseline: bothFsyncs, baselineLabel: bothLabel },
    { id: 'floor.remove', section: floors, series: 'floor.remove', baseline: [part('floor.fsync-folder')] },

    {
      id: 'files.create/floor',
      section: files,
      series: 'files.create',
      baseline: [part('floor.create')],
      target: 1.15,
    },
    {
      id: 'files.create/write-file-atomic-durable',
      section: files,
      series: 'files.create',
      baseline: [part('write-file-atomic.create-durable')],
    },
    {
      id: 'files.create/write-file-atomic',
      section: files,
      series: 'files.create',
      baseline: [part('write-file-atomic.create')],
    },
    {
      id: 'files.replace/floor',
      section: files,
      series: 'files.replace',
      baseline: [part('floor.replace')],
      target: 1.15,
    },
    {
      id: 'files.replace/write-file-atomic-durable',
      section: files,
      series: 'files.replace',
      baseline: [part('write-file-atomic.replace-durable')],
    },
    {
      id: 'files.replace/write-file-atomic',
      section: files,
      series: 'files.replace',
      baseline: [part('write-file-atomic.replace')],
    },
    { id: 'files.remove/floor', section: files, series: 'files.remove', baseline: [part('floor.remove')] },
    { id: 'files.read/read', section: files, series: 'files.read', baseline: [part('fs.read')] },
    { id: 'files.read/read-hash', section: files, series: 'files.read', baseline: [part('fs.read-hash')], target: 1.5 },

    {
      id: 'cycle.fresh/floor',
      section: cycle,
      series: 'cycle.fresh',
      baseline: [part('floor.create', publications.fresh)],
      target: 1.2,
    },
    {
      id: 'cycle.reused/floor',
      section: cycle,
      series: 'cycle.1',
      baseline: [part('floor.create', publications.reused)],
      target: 1.2,
    },
    {
      id: 'cycle.reused/exact-floor',
      section: cycle,
      series: 'cycle.1',
      baseline: [
        part('floor.create', publications.reusedKinds.create),
        part('floor.replace', publications.reusedKinds.replace),
        part('floor.remove', publications.reusedKinds.remove),
        part('floor.fsync-folder', -publications.reusedKinds.unsynced),
      ],
      target: 1.5,
      targetName: 'acquire + release, reused / the exact floor of its own publications',
      note:
        'the same publications, each against its own bare sequence (a removal makes one fsync, not two), ' +
        'less one folder fsync for each publication made without its own (table 7, previous release)',
    },
    {
      id: 'cycle.reused/proper-lockfile',
      section: cycle,
      series: 'cycle.1',
      baseline: [part('proper-lockfile.cycle')],
      note: 'proper-lockfile does not fsync, follows no fencing and keeps no registry: this ratio is the price of those guarantees',
    },

    { id: 'inspect/proper-lockfile', section: hot, series: 'inspect.1', baseline: [part('proper-lockfile.check')] },
    {
      id: 'inspect/reads',
      section: hot,
      series: 'inspect.1',
      baseline: [part('files.read', 10)],
      target: 1,
      targetName: 'inspect() / 10 private-files reads',
    },
    {
      id: 'local-access/proper-lockfile',
      section: hot,
      series: 'local-access',
      baseline: [part('proper-lockfile.check')],
    },
    { id: 'local-access/reads', section: hot, series: 'local-access', baseline: [part('files.read', 10)] },
    {
      id: 'connect/http-get',
      section: hot,
      series: 'transport.connect',
      baseline: [part('http.get')],
      target: 2,
      targetName: 'connect() / one bare GET',
      note: 'connect() reads localAccess() (inspecting only when it finds no owner), then makes one Host- and bearer-checked round trip, which the owner answers after re-asserting its lease, against one bare round trip',
    },
    {
      id: 'file-system-check/statfs',
      section: hot,
      series: 'file-system-check',
      baseline: [part('fs.statfs')],
      note: 'on a proven file system the check is this call: the allowance is read only on one that is not',
    },
    {
      id: 'file-system-check/inspect',
      section: hot,
      series: 'inspect.1',
      baseline: [part('inspect.1'), part('file-system-check', -1)],
      baselineLabel: 'the same, less the file-system check alone (before the check)',
      target: 1.05,
      targetName: 'inspect() with the file-system check / without it',
      note: 'an inspect() checks its state home once; there is no switch to turn the check off, so the same inspect() before it is its median less the median of the check alone, of the same state home in the same rounds',
    },
    {
      id: 'file-system-check/open',
      section: hot,
      series: 'state-home.open',
      baseline: [part('state-home.open'), part('file-system-check', -1)],
      baselineLabel: 'the same, less the file-system check alone (before the check)',
      note: "the open alone is no user's call: every command goes on to its operation, which checks again",
    },

    { id: 'scale.cycle.64', section: scale, series: 'cycle.64', baseline: [part('cycle.1')] },
    { id: 'scale.cycle.256', section: scale, series: 'cycle.256', baseline: [part('cycle.1')], target: 1.5 },
    {
      id: 'scale.acquire.256',
      section: scale,
      series: 'cycle.256:acquire',
      baseline: [part('cycle.1:acquire')],
      target: 1.5,
    },
    {
      id: 'scale.release.256',
      section: scale,
      series: 'cycle.256:release',
      baseline: [part('cycle.1:release')],
      target: 1.5,
    },
    { id: 'scale.inspect.64', section: scale, series: 'inspect.64', baseline: [part('inspect.1')] },
    { id: 'scale.inspect.256', section: scale, series: 'inspect.256', baseline: [part('inspect.1')], target: 1.5 },

    {
      id: 'contention/serial',
      section: contention,
      series: 'contention.wall',
      baseline: [part('contention.serial')],
      target: 1.1,
      targetName: `${processes} disjoint owners at once / one at a time, / the bare parallel floor`,
      floorFigure: 'contention.bare/serial',
      note:
        "target: as parallel as this machine's bare floor of the same trials (the row below) allows, 10 % over it at most " +
        "(it replaces a fixed 0.5x, which this machine's own floor never reached)",
    },
    {
      id: 'contention.bare/serial',
      section: contention,
      series: 'contention.bare.wall',
      baseline: [part('contention.bare.serial')],
      note:
        "the machine's own parallel floor for the target above: each process makes the reused cycle's publications (table 7's, in order) " +
        'with plain node:fs in its own folder, the two table writes under a bare lock on one shared table',
    },
    {
      id: 'contention.hold/bare',
      section: contention,
      series: 'contention.hold',
      baseline: [part('contention.bare.hold')],
      target: 1.3,
      targetName: 'registry lock held per transaction, uncontended / the bare lock over the same publications',
      note:
        "every registry transaction of the serial passes, from registry.lock's link to its unlink (the workers' hook), against " +
        "the bare replays' lock over the same publications (the table's replace, and in release the checkout lock's removal) in the same trials",
    },
    {
      id: 'contention.hold.contended/bare',
      section: contention,
      series: 'contention.hold.contended',
      baseline: [part('contention.bare.hold.contended')],
    },
    {
      id: 'contention/cycle',
      section: contention,
      series: 'contention.wall',
      baseline: [part('cycle.1', processes)],
      note: 'against the in-process reused cycle (a registry of 1 reservation, not up to 16)',
    },
  ];
}

/** Section 9's title. */
export const ETCD_SECTION =
  '9. etcd backend (acquire + release of one root on a real etcd, against the file backend, interleaved in rounds of their own)';

/** Section 9: acquire + release on etcd against the file backend's reused cycle measured beside it, and the cluster against the node. */
export function etcdFigureSpecs(): FigureSpec[] {
  const section = ETCD_SECTION;
  return [
    { id: 'etcd.single/file', section, series: 'etcd.single', baseline: [part('etcd.file')] },
    { id: 'etcd.cluster/file', section, series: 'etcd.cluster', baseline: [part('etcd.file')] },
    {
      id: 'etcd.cluster/single',
      section,
      series: 'etcd.cluster',
      baseline: [part('etcd.single')],
      note: 'each of the four writes of a cycle (the lease grant and the acquire transaction; the release transaction and the revoke) is committed by a majority of the 3 members, each fsyncing its own log on this one machine; acquire also waits for its watch to be created',
    },
  ];
}

/** Section 10's title. */
const COMMAND_SECTION =
  '10. The leasehold command (a whole process, spawn to exit, against node -e 0 in the same rounds)';

/** The built command against a bare Node process: what a shell prompt or a script pays per call, beyond Node's own start-up. */
export function commandFigureSpecs(): FigureSpec[] {
  const section = COMMAND_SECTION;
  const bare = [part('node.bare')];
  return [
    { id: 'command.version/node', section, series: 'command.version', baseline: bare, target: 1.3 },
    { id: 'command.status-stopped/node', section, series: 'command.status-stopped', baseline: bare, target: 1.5 },
    { id: 'command.status-running/node', section, series: 'command.status-running', baseline: bare, target: 1.5 },
    { id: 'command.list/node', section, series: 'command.list', baseline: bare },
  ];
}

/** Section 11's title. */
const NEIGHBOURS_SECTION =
  "11. The owner's neighbours (a waiter's hand-over, owner and waiter in two processes; a watch of a workspace whose owner changes nothing)";

/** A waiting acquire's hand-over against a bare 250 ms poll: a notification must wake it sooner than looking again would. */
export function handoverFigureSpecs(): FigureSpec[] {
  return [
    {
      id: 'handover.waiter/bare-poll',
      section: NEIGHBOURS_SECTION,
      series: 'handover.waiter',
      baseline: [part('handover.bare-poll')],
      target: 1,
      targetName: "a waiter's hand-over, release to acquire / a bare 250 ms poll",
      note:
        "the waiter's delay includes its whole acquire; the owner lets go at moments spread over the 250 ms " +
        'after the wait began, the same moments for both waiters',
    },
  ];
}

function labelOf(parts: readonly BaselinePart[], labels: ReadonlyMap<string, string>): string {
  return parts
    .map(({ series, times }) => {
      const label = labels.get(series) ?? series;
      return times === 1 ? `+ ${label}` : times < 0 ? `- ${-times} x ${label}` : `+ ${times} x ${label}`;
    })
    .join(' ')
    .replace(/^\+ /, '');
}

/**
 * Computes each figure from the summaries of its series. A baseline of
 * several parts sums their medians (and their p99s, as a bound).
 * @throws Error when a series a figure needs was not measured.
 */
export function computeFigures(
  specs: readonly FigureSpec[],
  summaries: ReadonlyMap<string, Summary>,
  labels: ReadonlyMap<string, string>,
): Figure[] {
  const summaryOf = (series: string): Summary => {
    const summary = summaries.get(series);
    if (summary === undefined) throw new Error(`figures: the series ${series} was not measured`);
    return summary;
  };
  const figures = specs.map((spec): Figure => {
    const measured = summaryOf(spec.series);
    const baselineMedian = spec.baseline.reduce((sum, { series, times }) => sum + times * summaryOf(series).median, 0);
    const baselineP99 = spec.baseline.reduce((sum, { series, times }) => sum + times * summaryOf(series).p99, 0);
    const label = labels.get(spec.series) ?? spec.series;
    const baselineLabel = spec.baselineLabel ?? labelOf(spec.baseline, labels);
    const ratio = measured.median / baselineMedian;
    return {
      id: spec.id,
      section: spec.section,
      label,
      median: measured.median,
      p99: measured.p99,
      samples: measured.samples,
      baseline: { label: baselineLabel, median: baselineMedian, p99: baselineP99 },
      ratio,
      target: spec.target ?? null,
      targetName: spec.target === undefined ? null : (spec.targetName ?? `${label} / ${baselineLabel}`),
      judged: null,
      met: spec.target === undefined ? null : ratio <= spec.target,
      note: spec.note ?? null,
    };
  });
  // A figure judged against another's ratio: only once every ratio of the run is known.
  return figures.map((figure, index) => {
    const { floorFigure, target } = specs[index]!;
    if (floorFigure === undefined) return figure;
    const floor = figures.find((candidate) => candidate.id === floorFigure);
    if (floor === undefined) throw new Error(`figures: ${figure.id} is judged against ${floorFigure}, not computed`);
    const judged = {
      floor: floor.id,
      label: `${floor.label} / ${floor.baseline.label}`,
      floorRatio: floor.ratio,
      ratio: figure.ratio / floor.ratio,
    };
    return { ...figure, judged, met: target === undefined ? null : judged.ratio <= target };
  });
}

/** Summaries of every series. */
export function summariesOf(series: ReadonlyMap<string, readonly number[]>): Map<string, Summary> {
  return new Map([...series].map(([id, values]) => [id, summarize(values)]));
}
