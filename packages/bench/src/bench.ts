#!/usr/bin/env node
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { measureAvailability } from './availability.js';
import { commandOperations } from './command-operations.js';
import { ContentionPool, type ContentionTrial } from './contention.js';
import { etcdVersion } from '@leasehold/test-utils';
import { measureEtcd } from './etcd-operations.js';
import { commandFigureSpecs, computeFigures, figureSpecs, handoverFigureSpecs, summariesOf } from './figures.js';
import { fileOperations } from './file-operations.js';
import { BenchPlace } from './fixtures.js';
import { countFsyncs, type FsyncCount } from './fsync-counts.js';
import { now, elapsed, runInterleaved, type Operation } from './harness.js';
import { describeMachine } from './machine.js';
import { ownershipOperations } from './ownership-operations.js';
import { formatProfile, profileOperation } from './profile.js';
import { formatReport, targetRows, type BenchResult, type Settings } from './report.js';
import { median, summarize } from './statistics.js';
import { countSyscalls } from './syscalls.js';
import { measureHandover, measureIdleWatch } from './neighbours.js';
import { transportOperations } from './transport-operations.js';

const USAGE = `Usage: pnpm bench [--quick] [--json [file]] [--rounds n] [--reads n] [--profile <operation> [--samples n] [--profile-out file]]

  --quick        a reduced run (fewer rounds, contention trials and reads), under 30 s
  --json [file]  also write the figures as JSON (default bench-results.json; "-" for stdout)
  --rounds n     kept rounds (default 200, quick 15)
  --reads n      inspect() calls of the reader-availability measure (default 20000, quick 2000)
  --profile op   instead of the benchmark, profile one operation (CPU, self time by function)
                 e.g. files.create, cycle.1, cycle.256, inspect.1, inspect.256, local-access
`;

const PROCESSES = 16;
/** Writers churning while the reader-availability measure reads (section 8, readers under churn). */
const CHURNING_WRITERS = 8;

interface Options {
  quick: boolean;
  json: string | undefined;
  rounds: number | undefined;
  reads: number | undefined;
  profile: string | undefined;
  samples: number;
  profileOut: string | undefined;
}

function parseOptions(argv: readonly string[]): Options {
  const options: Options = {
    quick: false,
    json: undefined,
    rounds: undefined,
    reads: undefined,
    profile: undefined,
    samples: 200,
    profileOut: undefined,
  };
  const count = (value: string | undefined, flag: string): number => {
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed < 1) throw new Error(`${flag} needs a positive whole number`);
    return parsed;
  };
  for (let index = 0; index < argv.length; index += 1) {
    const argument = argv[index]!;
    const value = argv[index + 1];
    switch (argument) {
      case '--':
        break;
      case '--quick':
        options.quick = true;
        break;
      case '--json':
        if (value !== undefined && (value === '-' || !value.startsWith('-'))) {
          options.json = value;
          index += 1;
        } else {
          options.json = 'bench-results.json';
        }
        break;
      case '--rounds':
        options.rounds = count(value, argument);
        index += 1;
        break;
      case '--reads':
        options.reads = count(value, argument);
        index += 1;
        break;
      case '--profile':
        if (value === undefined) throw new Error('--profile needs an operation id');
        options.profile = value;
        index += 1;
        break;
      case '--samples':
        options.samples = count(value, argument);
        index += 1;
        break;
      case '--profile-out':
        if (value === undefined) throw new Error('--profile-out needs a file');
        options.profileOut = value;
        index += 1;
        break;
      case '--help':
      case '-h':
        process.stdout.write(USAGE);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown argument ${argument}\n${USAGE}`);
    }
  }
  return options;
}

function settingsOf(options: Options, operations: number): Settings {
  return {
    quick: options.quick,
    rounds: options.rounds ?? (options.quick ? 15 : 200),
    warmupRounds: options.quick ? 3 : 10,
    operations,
    processes: PROCESSES,
    contentionTrials: options.quick ? 2 : 8,
    availabilityWriters: CHURNING_WRITERS,
    availabilityReads: options.reads ?? (options.quick ? 2_000 : 20_000),
  };
}

function progress(label: string): (done: number, total: number) => void {
  let shown = -1;
  return (done, total) => {
    const tenth = Math.floor((10 * done) / total);
    if (tenth === shown) return;
    shown = tenth;
    process.stderr.write(`${label}: ${done}/${total} rounds\n`);
  };
}

async function profile(options: Options, operations: readonly Operation[]): Promise<void> {
  const operation = operations.find((candidate) => candidate.id === options.profile);
  if (operation === undefined) {
    throw new Error(
      `no operation ${options.profile}; one of: ${operations.map((candidate) => candidate.id).join(', ')}`,
    );
  }
  for (let index = 0; index < 20; index += 1) await operation.sample(() => undefined);
  const summary = await profileOperation(operation, options.samples, options.profileOut);
  process.stdout.write(`${formatProfile(summary)}\n`);
}

function counted(fsyncs: readonly FsyncCount[], id: string): FsyncCount {
  const found = fsyncs.find((entry) => entry.id === id);
  if (found === undefined) throw new Error(`no fsync count for ${id}`);
  return found;
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const startedAt = new Date();
  const start = now();
  const place = new BenchPlace();
  let pool: ContentionPool | undefined;
  let barePool: ContentionPool | undefined;
  let closeOwnership: (() => Promise<void>) | undefined;
  let closeTransport: (() => Promise<void>) | undefined;
  const interrupted = () => {
    place.remove();
    process.exit(130);
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    const ownership = await ownershipOperations(place);
    closeOwnership = ownership.close;
    const transport = await transportOperations(place);
    closeTransport = transport.close;
    const operations = [...fileOperations(place), ...ownership.operations, ...transport.operations];
    if (options.profile !== undefined) return await profile(options, operations);

    const settings = settingsOf(options, operations.length);
    const fsyncs: FsyncCount[] = await countFsyncs(place);
    const contentionWarmup = options.quick ? 2 : 5;
    pool = await ContentionPool.start(place, PROCESSES, contentionWarmup);
    const contentionPool = pool;
    // The machine's own floor for the contention target: the reused cycle's publications, bare, in the same trials.
    const reusedCycle = ['acquire.reused', 'release.reused'].map((id) => counted(fsyncs, id).sequence).join(' ');
    // Section 7's system calls: the reused cycle and its bare replay, each under strace in a process of its own, before any timed round.
    const syscalls = await countSyscalls(place, reusedCycle, {
      cycles: options.quick ? 10 : 100,
      warmupCycles: options.quick ? 3 : 20,
    });
    barePool = await ContentionPool.startBare(place, PROCESSES, contentionWarmup, reusedCycle);
    const bareContentionPool = barePool;
    const trials: ContentionTrial[] = [];
    const bareTrials: ContentionTrial[] = [];
    const trialRounds = new Set(
      Array.from({ length: settings.contentionTrials }, (_, trial) =>
        Math.floor(((trial + 0.5) * settings.rounds) / settings.contentionTrials),
      ),
    );
    const series = await runInterleaved(operations, {
      rounds: settings.rounds,
      warmupRounds: settings.warmupRounds,
      afterRound: async (round) => {
        if (!trialRounds.has(round)) return;
        trials.push(await contentionPool.trial(trials.length % 2 === 0));
        bareTrials.push(await bareContentionPool.trial(bareTrials.length % 2 === 0));
      },
      progress: progress(settings.quick ? 'bench --quick' : 'bench'),
    });
    process.stderr.write(
      `readers under churn: ${settings.availabilityReads} inspect() calls, ${CHURNING_WRITERS} writers\n`,
    );
    const availability = await measureAvailability(place, pool, CHURNING_WRITERS, settings.availabilityReads);
    await pool.stop();
    pool = undefined;
    await barePool.stop();
    barePool = undefined;
    const etcd = await measureEtcd(place, etcdVersion(), {
      rounds: settings.rounds,
      warmupRounds: settings.warmupRounds,
      progress: progress(settings.quick ? 'bench --quick, etcd' : 'bench, etcd'),
    });
    for (const [id, values] of etcd.series) series.set(id, [...values]);
    // In rounds of their own, fewer: each sample is a whole process (about Node's start-up, tens of ms).
    const commandRounds = { rounds: options.quick ? 5 : 40, warmupRounds: options.quick ? 1 : 3 };
    const commands = await commandOperations(place, { running: transport.owner });
    const commandSeries = await runInterleaved(commands, {
      ...commandRounds,
      progress: progress(settings.quick ? 'bench --quick, the command' : 'bench, the command'),
    });
    for (const [id, values] of commandSeries) series.set(id, values);
    // Each sample waits out up to two 250 ms polls: few rounds.
    const handoverRounds = { rounds: options.quick ? 3 : 15, warmupRounds: options.quick ? 1 : 2 };
    const handover = await measureHandover(place, {
      ...handoverRounds,
      progress: progress(settings.quick ? "bench --quick, a waiter's hand-over" : "bench, a waiter's hand-over"),
    });
    for (const [id, values] of handover.series) series.set(id, values);
    process.stderr.write("the owner's neighbours: a watch of an idle workspace\n");
    const idleWatch = await measureIdleWatch(place, options.quick ? 1_000 : 5_000);

    // Each trial's wall and serial times, and every transaction's hold of the lock, uncontended (the serial
    // passes) and contended: Leasehold's and the bare replays'.
    const contentionSeries: ReadonlyArray<readonly [string, number[]]> = [
      ['contention.wall', trials.map((trial) => trial.wall)],
      ['contention.serial', trials.map((trial) => trial.serial)],
      ['contention.bare.wall', bareTrials.map((trial) => trial.wall)],
      ['contention.bare.serial', bareTrials.map((trial) => trial.serial)],
      ['contention.hold', trials.flatMap((trial) => trial.serialLockHolds)],
      ['contention.hold.contended', trials.flatMap((trial) => trial.lockHolds)],
      ['contention.bare.hold', bareTrials.flatMap((trial) => trial.serialLockHolds)],
      ['contention.bare.hold.contended', bareTrials.flatMap((trial) => trial.lockHolds)],
    ];
    for (const [id, values] of contentionSeries) series.set(id, values);
    const labels = new Map<string, string>(
      [...operations, ...commands].map((operation) => [operation.id, operation.label]),
    );
    for (const operation of ownership.operations) {
      if (!operation.id.startsWith('cycle.')) continue;
      labels.set(`${operation.id}:acquire`, operation.label.replace('acquire + release', 'acquire'));
      labels.set(`${operation.id}:release`, operation.label.replace('acquire + release', 'release'));
    }
    for (const [id, label] of [...etcd.labels, ...handover.labels]) labels.set(id, label);
    labels.set('contention.wall', `${PROCESSES} disjoint owners acquire + release at once, wall time`);
    labels.set('contention.serial', `the same ${PROCESSES} one at a time (sum)`);
    labels.set(
      'contention.bare.wall',
      `bare fsync floor: ${PROCESSES} processes replay a reused cycle's publications at once, wall time`,
    );
    labels.set('contention.bare.serial', `the same ${PROCESSES} bare replays one at a time (sum)`);
    labels.set('contention.hold', 'registry lock held by one transaction, uncontended (serial passes)');
    labels.set('contention.hold.contended', `the same, ${PROCESSES} processes at once`);
    labels.set('contention.bare.hold', 'bare lock held by the same publications, uncontended');
    labels.set('contention.bare.hold.contended', `the same, ${PROCESSES} bare replays at once`);
    const [acquireFresh, releaseFresh, acquireReused, releaseReused] = [
      'acquire.fresh',
      'release.fresh',
      'acquire.reused',
      'release.reused',
    ].map((id) => counted(fsyncs, id)) as [FsyncCount, FsyncCount, FsyncCount, FsyncCount];
    const publications = {
      fresh: acquireFresh.publications + releaseFresh.publications,
      reused: acquireReused.publications + releaseReused.publications,
      reusedKinds: {
        create: acquireReused.kinds.create + releaseReused.kinds.create,
        replace: acquireReused.kinds.replace + releaseReused.kinds.replace,
        remove: acquireReused.kinds.remove + releaseReused.kinds.remove,
        unsynced: acquireReused.unsynced + releaseReused.unsynced,
      },
    };
    const summaries = summariesOf(series);
    const figures = computeFigures(figureSpecs(publications, PROCESSES), summaries, labels);
    const commandFigures = computeFigures(commandFigureSpecs(), summaries, labels);
    const handoverFigures = computeFigures(handoverFigureSpecs(), summaries, labels);
    const outcomes = trials.flatMap((trial) => trial.outcomes);
    const result: BenchResult = {
      schema: 'leasehold.bench/3',
      startedAt: startedAt.toISOString(),
      durationMs: elapsed(start),
      unit: 'ms',
      settings,
      machine: describeMachine(),
      series: Object.fromEntries(
        [...summaries].map(([id, summary]) => [id, { label: labels.get(id) ?? id, ...summary }]),
      ),
      figures,
      contention: {
        processes: PROCESSES,
        trials: trials.length,
        busy: outcomes.filter((outcome) => outcome === 'busy').length,
        failed: outcomes.filter((outcome) => outcome !== 'ok' && outcome !== 'busy').length,
        cycles: outcomes.length,
        wall: summarize(trials.map((trial) => trial.wall)),
        serial: summarize(trials.map((trial) => trial.serial)),
        lockHeld: summarize(trials.map((trial) => trial.lockHeld)),
        serialLockHeld: summarize(trials.map((trial) => trial.serialLockHeld)),
        transactions: Math.max(...trials.map((trial) => trial.transactions)),
        idlePerHandover: median(trials.map((trial) => (trial.wall - trial.lockHeld) / Math.max(1, trial.transactions))),
      },
      availability,
      fsyncs,
      syscalls,
      etcd: etcd.section,
      command: { ...commandRounds, figures: commandFigures },
      neighbours: { handover: { ...handoverRounds, figures: handoverFigures }, idleWatch },
      targets: targetRows([...figures, ...commandFigures, ...handoverFigures]),
    };
    const report = formatReport(result);
    const json = `${JSON.stringify(result, null, 2)}\n`;
    if (options.json === '-') {
      process.stderr.write(`${report}\n`);
      process.stdout.write(json);
    } else {
      process.stdout.write(`${report}\n`);
      if (options.json !== undefined) {
        writeFileSync(resolve(options.json), json);
        process.stdout.write(`\nJSON written to ${resolve(options.json)}\n`);
      }
    }
  } finally {
    await pool?.stop();
    await barePool?.stop();
    await closeOwnership?.();
    await closeTransport?.();
    place.remove();
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
