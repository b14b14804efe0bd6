import type { AvailabilityResult } from './availability.js';
import type { IdleWatchResult } from './neighbours.js';
import type { EtcdSection } from './etcd-operations.js';
import type { FsyncCount } from './fsync-counts.js';
import { FSYNC_MINIMUM, FSYNC_PROOF } from './fsync-counts.js';
import { ETCD_SECTION, type Figure } from './figures.js';
import type { Machine } from './machine.js';
import type { Summary } from './statistics.js';
import { formatSyscalls, type SyscallSection } from './syscalls.js';

/** How a run was made. */
export interface Settings {
  readonly quick: boolean;
  readonly rounds: number;
  readonly warmupRounds: number;
  readonly operations: number;
  readonly processes: number;
  readonly contentionTrials: number;
  /** Writer processes churning during the reader-availability measure. */
  readonly availabilityWriters: number;
  /** inspect() calls of that measure. */
  readonly availabilityReads: number;
}

/** What the contention trials saw. */
export interface ContentionResult {
  readonly processes: number;
  readonly trials: number;
  /** Answers `busy` in the concurrent passes (must be 0 with the default lock wait). */
  readonly busy: number;
  /** Answers other than `ok` and `busy`. */
  readonly failed: number;
  readonly cycles: number;
  readonly wall: Summary;
  readonly serial: Summary;
  /** The registry lock's total hold time in each concurrent pass. */
  readonly lockHeld: Summary;
  /** The same in each serial pass. */
  readonly serialLockHeld: Summary;
  /** Registry transactions per concurrent pass. */
  readonly transactions: number;
  /** Median over trials of (wall - lock held) / transactions: how long the free lock waits for its next holder. */
  readonly idlePerHandover: number;
}

/** Everything one run measured: what `--json` writes. */
export interface BenchResult {
  readonly schema: 'leasehold.bench/3';
  readonly startedAt: string;
  readonly durationMs: number;
  readonly unit: 'ms';
  readonly settings: Settings;
  readonly machine: Machine;
  readonly series: Readonly<Record<string, Summary & { readonly label: string }>>;
  readonly figures: readonly Figure[];
  readonly contention: ContentionResult;
  /** Section 8, readers under churn: inspect() of an untouched, stopped workspace while other workspaces' writers churn. */
  readonly availability: AvailabilityResult;
  readonly fsyncs: readonly FsyncCount[];
  /** System calls per reused acquire + release and per bare replay of its publications, or why they were not counted. */
  readonly syscalls: SyscallSection;
  /** Section 9: acquire + release of one root on a real etcd, or why it was skipped. */
  readonly etcd: EtcdSection;
  /** The built `leasehold` command as a whole process, in rounds of its own. */
  readonly command: RoundsAndFigures;
  /** Section 11, the owner's neighbours: a waiter's hand-over against a bare poll, and what a watch of an idle workspace costs. */
  readonly neighbours: { readonly handover: RoundsAndFigures; readonly idleWatch: IdleWatchResult };
  /** The closing table: every target of the run, its figure, its floor, their ratio and whether it was met. */
  readonly targets: readonly TargetRow[];
}

/** One row of the closing table. */
export interface TargetRow {
  /** The figure's id. */
  readonly id: string;
  /** What is judged: `Figure.targetName`. */
  readonly name: string;
  /** The figure: a median in ms, or, for a ratio judged against the floor's ratio, that ratio (`unit: 'x'`). */
  readonly figure: number;
  /** Its floor, in the same unit: the baseline's median, or the floor figure's ratio. */
  readonly floor: number;
  readonly unit: 'ms' | 'x';
  /** figure / floor: what the target judges. */
  readonly ratio: number;
  readonly target: number;
  readonly met: boolean;
}

/** The closing table's rows: each figure with a target, judged against its floor of the same run. */
export function targetRows(figures: readonly Figure[]): TargetRow[] {
  return figures.flatMap((figure): TargetRow[] => {
    if (figure.target === null) return [];
    const { judged } = figure;
    return [
      {
        id: figure.id,
        name: figure.targetName ?? figure.label,
        figure: judged === null ? figure.median : figure.ratio,
        floor: judged === null ? figure.baseline.median : judged.floorRatio,
        unit: judged === null ? 'ms' : 'x',
        ratio: judged === null ? figure.ratio : judged.ratio,
        target: figure.target,
        met: figure.met === true,
      },
    ];
  });
}

/** Figures measured in rounds of their own (sections 10 and 11), and those rounds. */
interface RoundsAndFigures {
  readonly rounds: number;
  readonly warmupRounds: number;
  readonly figures: readonly Figure[];
}

/** A duration in milliseconds, as µs below 1 ms. */
export function formatDuration(milliseconds: number): string {
  if (milliseconds < 0.01) return `${(milliseconds * 1000).toFixed(2)} µs`;
  if (milliseconds < 0.1) return `${(milliseconds * 1000).toFixed(1)} µs`;
  if (milliseconds < 1) return `${(milliseconds * 1000).toFixed(0)} µs`;
  if (milliseconds < 10) return `${milliseconds.toFixed(2)} ms`;
  if (milliseconds < 1000) return `${milliseconds.toFixed(1)} ms`;
  return `${(milliseconds / 1000).toFixed(2)} s`;
}

/** "met", or "MISSED (+n%)": how far `ratio` is over `target`. */
function verdict(ratio: number, target: number): string {
  return ratio <= target ? 'met' : `MISSED (+${((ratio / target - 1) * 100).toFixed(0)}%)`;
}

/** A figure row's target cell; a ratio judged against a floor figure's ratio names that floor beside it. */
function targetText(figure: Figure): string {
  if (figure.target === null) return '';
  const { judged } = figure;
  if (judged === null) return `<= ${figure.target.toFixed(2)}x ${verdict(figure.ratio, figure.target)}`;
  return (
    `/ the bare floor's ${judged.floorRatio.toFixed(2)}x = ${judged.ratio.toFixed(2)}x, ` +
    `<= ${figure.target.toFixed(2)}x ${verdict(judged.ratio, figure.target)}`
  );
}

function table(rows: readonly (readonly string[])[], rightAligned: ReadonlySet<number>): string[] {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => [...row[column]!].length)));
  return rows.map((row) =>
    row
      .map((cell, column) => {
        const padding = ' '.repeat(widths[column]! - [...cell].length);
        return rightAligned.has(column) ? padding + cell : cell + padding;
      })
      .join('  ')
      .trimEnd(),
  );
}

/** `part` of `whole` as a percentage with two decimals (100 % only when all). */
function percent(part: number, whole: number): string {
  if (part === whole) return '100 %';
  return `${Math.min(99.99, (100 * part) / whole).toFixed(2)} %`;
}

/** Section 8: what a reader of a quiet workspace saw while other workspaces' writers churned. */
function formatAvailability(availability: AvailabilityResult): string[] {
  const { writers, reads, stopped, answers, busy, failed, cycles } = availability;
  const wrong = Object.entries(answers).filter(([answer]) => answer !== 'stopped');
  const rows = [
    ['measure', 'this run', 'target'],
    [
      `inspect() of the untouched workspace answered stopped`,
      `${stopped} of ${reads} (${percent(stopped, reads)})`,
      `100 % ${stopped === reads ? 'met' : 'MISSED'}`,
    ],
    [
      `busy answers to the writers (acquire or release)`,
      `${busy} of ${cycles} cycles`,
      `0 ${busy === 0 ? 'met' : 'MISSED'}`,
    ],
    [`other failures of the writers`, `${failed} of ${cycles} cycles`, ''],
    [
      `inspect() under the churn, median / p99`,
      `${formatDuration(availability.inspect.median)} / ${formatDuration(availability.inspect.p99)}`,
      '',
    ],
    [`writers' cycles per second (all ${writers})`, (cycles / (availability.churnMs / 1000)).toFixed(0), ''],
  ];
  const lines = [
    `8. Readers under churn (${writers} processes acquire + release their own workspaces without pause; this process inspects a 9th, stopped, untouched one)`,
    ...table(rows, new Set()).map((line) => `  ${line}`),
  ];
  if (wrong.length > 0)
    lines.push(
      `  wrong answers: ${wrong.map(([answer, count]) => `${answer} ${count}`).join(', ')}; e.g. ${availability.wrongReasons.join(' | ')}`,
    );
  return lines;
}

/** The figure table, one title line per section: figure, median, p99, baseline, its median, ratio, target. */
function figureTable(figures: readonly Figure[]): string[] {
  const header = ['figure', 'median', 'p99', 'baseline', 'baseline median', 'ratio', 'target'];
  const rows: string[][] = [header];
  const sectionRows = new Map<number, string>();
  let section = '';
  for (const figure of figures) {
    if (figure.section !== section) {
      section = figure.section;
      sectionRows.set(rows.length, section);
      rows.push(['', '', '', '', '', '', '']);
    }
    rows.push([
      figure.label,
      formatDuration(figure.median),
      formatDuration(figure.p99),
      figure.baseline.label,
      formatDuration(figure.baseline.median),
      `${figure.ratio.toFixed(2)}x`,
      targetText(figure),
    ]);
  }
  // A table without targets (section 9) has no target column.
  const shown = figures.some((figure) => figure.target !== null) ? rows : rows.map((row) => row.slice(0, -1));
  const lines: string[] = [];
  table(shown, new Set([1, 2, 4, 5])).forEach((line, index) => {
    const title = sectionRows.get(index);
    if (title !== undefined) lines.push('', title);
    else lines.push(index === 0 ? line : `  ${line}`);
  });
  return lines;
}

/** "Notes:" and one line per figure that has a note; nothing when none has. */
function noteLines(figures: readonly Figure[]): string[] {
  const notes = figures.filter((figure) => figure.note !== null);
  if (notes.length === 0) return [];
  return [
    '',
    'Notes:',
    ...notes.map((figure) => `  ${figure.label} against ${figure.baseline.label}: ${figure.note}.`),
  ];
}

/** Section 9: its figures in a table of their own, then each cycle's halves; or the plain reason it was skipped. */
function formatEtcd(etcd: EtcdSection, series: BenchResult['series']): string[] {
  if (etcd.status === 'skipped') return [`${ETCD_SECTION}: skipped: ${etcd.reason}.`];
  // figureTable gives the header, a blank line and the one section title, then the rows.
  const [header, , title, ...rows] = figureTable(etcd.figures);
  const names = {
    'etcd.file': 'file backend',
    'etcd.single': 'etcd single node',
    'etcd.cluster': `etcd ${etcd.members.cluster}-member cluster`,
  };
  const halves = Object.entries(names).map(([id, name]) => {
    const acquire = series[`${id}:acquire`];
    const release = series[`${id}:release`];
    return acquire === undefined || release === undefined
      ? `${name} -`
      : `${name} ${formatDuration(acquire.median)} / ${formatDuration(release.median)}`;
  });
  return [
    title!,
    `  etcd ${etcd.version}, started by the bench on loopback: a single node and a ${etcd.members.cluster}-member cluster, ` +
      `data folders in the run's temp folder; ${etcd.rounds} rounds after ${etcd.warmupRounds} warm-up rounds; ` +
      `the section took ${formatDuration(etcd.durationMs)}, starting and stopping the members included.`,
    `  ${header!}`,
    ...rows,
    `  acquire / release medians: ${halves.join('; ')}.`,
    ...noteLines(etcd.figures),
  ];
}

/** The proved bounds of a count, with how far the measured count is above them: "9 (+2)", "6..8", "-". */
function provedMinimum(count: FsyncCount): string {
  if (count.proved === undefined) return '-';
  const { lower, upper } = count.proved;
  const bounds = lower === upper ? String(lower) : `${lower}..${upper}`;
  return count.total > upper ? `${bounds} (+${count.total - upper})` : bounds;
}

/** Section 11: the hand-over's figure in a table of its own, then the idle watch's CPU. */
function formatNeighbours(
  { handover, idleWatch: watch }: BenchResult['neighbours'],
  series: BenchResult['series'],
): string[] {
  const perMinute = (ms: number) => `${ms.toFixed(2)} ms`;
  // figureTable gives the header, a blank line and the one section title, then the rows.
  const [header, , title, ...rows] = figureTable(handover.figures);
  const range = (id: string) => {
    const summary = series[id];
    return summary === undefined ? '-' : `${formatDuration(summary.min)} to ${formatDuration(summary.max)}`;
  };
  return [
    title!,
    `  ${header!}`,
    ...rows,
    `  ${handover.rounds} rounds after ${handover.warmupRounds} warm-up rounds; from the fastest to the slowest: ` +
      `the waiter ${range('handover.waiter')}, the bare poll ${range('handover.bare-poll')}.`,
    ...handover.figures.flatMap((figure) => (figure.note === null ? [] : [`  ${figure.note}.`])),
    `  CPU a watch adds per minute at the default 1 s poll: ${perMinute(watch.watchCpuPerMinuteMs)}, ` +
      `against ${perMinute(watch.barePollCpuPerMinuteMs)} for a bare poll of the same files` +
      (watch.ratio === null ? '.' : ` (${watch.ratio.toFixed(2)}x).`),
    `  measured at a ${watch.pollMs} ms poll over ${(watch.spanMs / 1000).toFixed(0)} s each, beyond the same process doing nothing for as long.`,
  ];
}

/** The text table: every figure by section, the contention counts, the fsync counts and the targets. */
export function formatReport(result: BenchResult): string {
  const { settings, machine, contention } = result;
  const lines: string[] = [
    `Leasehold bench (${settings.quick ? 'quick' : 'full'}): ${settings.operations} operations interleaved in rotating order, ` +
      `${settings.rounds} rounds after ${settings.warmupRounds} warm-up rounds; contention: ${settings.contentionTrials} trials of ` +
      `${settings.processes} processes, spread across the rounds. Run took ${formatDuration(result.durationMs)}.`,
    `Machine: ${machine.cpus} CPUs (${machine.model}), ${machine.memoryGiB} GiB, Node ${machine.node}, ${machine.kernel}, ` +
      `${machine.tmpdir} on ${machine.filesystem}.`,
    'median and p99 of each operation; ratio = median / baseline median, both from this run.',
  ];
  lines.push('', ...figureTable(result.figures));
  lines.push(...noteLines(result.figures));
  lines.push(
    '',
    `Contention: busy answers ${contention.busy} of ${contention.cycles} concurrent cycles ` +
      `(${contention.trials} trials x ${contention.processes} processes); other failures ${contention.failed}.`,
    `Registry lock held ${formatDuration(contention.lockHeld.median)} of the ${formatDuration(contention.wall.median)} wall time ` +
      `(medians; ${contention.transactions} transactions per pass): the free lock waited ${formatDuration(contention.idlePerHandover)} ` +
      `on average for its next holder. Serial pass: held ${formatDuration(contention.serialLockHeld.median)} of ${formatDuration(contention.serial.median)}.`,
  );

  lines.push('', '7. fsyncs per operation (counted through the beforeMutation hook)');
  const fsyncRows = [
    ['operation', 'file', 'folder', 'measured', 'proved minimum', 'publications', 'previous release'],
    ...result.fsyncs.map((count) => [
      count.label,
      String(count.file),
      String(count.folder),
      String(count.total),
      provedMinimum(count),
      String(count.publications),
      count.previousRelease === count.total
        ? String(count.previousRelease)
        : `${count.previousRelease} (-${count.previousRelease - count.total})`,
    ]),
  ];
  lines.push(...table(fsyncRows, new Set([1, 2, 3, 4, 5, 6])).map((line) => `  ${line}`));
  lines.push(
    '  measured: the fsyncs this release makes (file + folder), each a contents fsync before a publication or a folder fsync after one.',
  );
  lines.push(`  proved minimum: ${FSYNC_MINIMUM}`);
  lines.push(`  previous release: ${FSYNC_PROOF}`);
  lines.push(...formatSyscalls(result.syscalls));

  lines.push('', ...formatAvailability(result.availability));
  lines.push('', ...formatEtcd(result.etcd, result.series));
  lines.push(
    '',
    ...figureTable(result.command.figures),
    `  ${result.command.rounds} rounds after ${result.command.warmupRounds} warm-up rounds, the five processes in rotating order.`,
  );

  lines.push('', ...formatNeighbours(result.neighbours, result.series));

  const { targets, availability } = result;
  const met = targets.filter((target) => target.met).length;
  const busy = contention.busy + availability.busy;
  const available = availability.stopped === availability.reads;
  lines.push(
    '',
    `Targets: ${met} of ${targets.length} met; busy ${busy === 0 ? '0 (met)' : `${busy} (MISSED)`}; ` +
      `readers ${percent(availability.stopped, availability.reads)} stopped (${available ? 'met' : 'MISSED'}).`,
    ...closingTable(targets),
  );
  return lines.join('\n');
}

/** A figure or floor of the closing table: a duration, or a ratio. */
function valueText(value: number, unit: TargetRow['unit']): string {
  return unit === 'ms' ? formatDuration(value) : `${value.toFixed(2)}x`;
}

/** Every target of the run, each judged against its floor measured in the same run. */
function closingTable(targets: readonly TargetRow[]): string[] {
  const rows = [
    ['target', 'figure', 'floor', 'ratio', 'limit', 'result'],
    ...targets.map((target) => [
      target.name,
      valueText(target.figure, target.unit),
      valueText(target.floor, target.unit),
      `${target.ratio.toFixed(2)}x`,
      `<= ${target.target.toFixed(2)}x`,
      verdict(target.ratio, target.target),
    ]),
  ];
  return table(rows, new Set([1, 2, 3, 4])).map((line) => `  ${line}`);
}
