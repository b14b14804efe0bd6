import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Backend } from '@leasehold/contracts';
import { fileOwnership } from '@leasehold/coordination';
import { etcdBackend, type EtcdBackend } from '@leasehold/etcd';
import { fileRecovery } from '@leasehold/recovery';
import { cleanUp, startEtcd, type EtcdCluster } from '@leasehold/test-utils';
import { computeFigures, etcdFigureSpecs, summariesOf, type Figure } from './figures.js';
import { CONFIG, boundEndpoint, type BenchPlace } from './fixtures.js';
import { elapsed, now, runInterleaved, type Operation, type RunPlan } from './harness.js';
import { cycle, seamCycle } from './ownership-operations.js';

// Section 9: what acquire + release of one root costs on a real etcd (one
// node, and a 3-member cluster on loopback) against the file backend's reused
// cycle. The members run only during these rounds of their own, after the
// other sections: their raft ticks and WAL fsyncs would otherwise land on the
// file-backend figures, and the file cycle interleaved here bears the same.

/** Members of the cluster measured beside the single node. */
const CLUSTER_MEMBERS = 3;

/** What section 9 says: measured, or skipped and why. */
export type EtcdSection =
  | { readonly status: 'skipped'; readonly reason: string }
  | {
      readonly status: 'measured';
      /** `etcd --version`. */
      readonly version: string;
      readonly members: { readonly single: 1; readonly cluster: typeof CLUSTER_MEMBERS };
      readonly rounds: number;
      readonly warmupRounds: number;
      readonly figures: readonly Figure[];
      /** From starting the members to their exit: what the section adds to the run. */
      readonly durationMs: number;
    };

/** The section, plus its series and their labels for the run's `series`. */
export interface EtcdMeasure {
  readonly section: EtcdSection;
  readonly series: ReadonlyMap<string, readonly number[]>;
  readonly labels: ReadonlyMap<string, string>;
}

/** The three cycles and what they hold: two clusters, their clients. */
interface EtcdSuite {
  readonly operations: Operation[];
  close(): Promise<void>;
}

/**
 * An ownership of one root on `members`, composed as a state home that records etcd opens it (the
 * etcd fence over this host's own files), warmed by one untimed cycle (the first gRPC connection),
 * measured as `id`.
 */
async function etcdCycle(
  place: BenchPlace,
  members: EtcdCluster,
  id: string,
  label: string,
  opened: EtcdBackend[],
): Promise<Operation> {
  const prefix = '/leasehold/bench';
  const backend: Backend = { kind: 'etcd', endpoints: [...members.endpoints], prefix };
  const stateHome = join(place.root, `state-${id}`);
  const ownership = etcdBackend({
    endpoints: members.endpoints,
    prefix,
    host: hostname(),
    local: fileOwnership({ stateHome, backend }),
    localRecovery: fileRecovery({ stateHome, backend }),
  });
  opened.push(ownership);
  const root = place.workspace();
  const endpoint = boundEndpoint();
  await (await ownership.acquire(root, CONFIG, { boundEndpoint: endpoint })).release();
  return cycle(
    id,
    label,
    () => undefined,
    () => ownership.acquire(root, CONFIG, { boundEndpoint: endpoint }),
  );
}

/** Starts both clusters and builds the file cycle and the two etcd cycles. */
async function etcdSuite(place: BenchPlace): Promise<EtcdSuite> {
  const clusters: EtcdCluster[] = [];
  const opened: EtcdBackend[] = [];
  const close = async () => {
    await Promise.all(opened.splice(0).map((ownership) => ownership.close()));
    await Promise.all(clusters.splice(0).map((members) => members.stop()));
    await cleanUp(); // their data folders
  };
  try {
    const [single, cluster] = await Promise.all(
      ([1, CLUSTER_MEMBERS] as const).map((members) => startEtcd({ members })),
    );
    clusters.push(single!, cluster!);
    const fileHome = join(place.root, 'state-beside-etcd');
    const [files, reused, fileEndpoint] = [fileOwnership({ stateHome: fileHome }), place.workspace(), boundEndpoint()];
    await (await files.acquire(reused, CONFIG, { boundEndpoint: fileEndpoint })).release();
    const operations = [
      seamCycle(
        'etcd.file',
        'acquire + release of one root, file backend (reused workspace)',
        files,
        () => reused,
        () => fileEndpoint,
      ),
      await etcdCycle(
        place,
        single!,
        'etcd.single',
        "acquire + release of one root, etcd single node over this host's files",
        opened,
      ),
      await etcdCycle(
        place,
        cluster!,
        'etcd.cluster',
        `acquire + release of one root, etcd ${CLUSTER_MEMBERS}-member cluster over this host's files`,
        opened,
      ),
    ];
    return { operations, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * Section 9: skipped when `version` is undefined (no etcd on PATH); otherwise
 * starts a single node and a 3-member cluster on loopback, runs the file
 * cycle and both etcd cycles interleaved for `plan`'s rounds, and stops them.
 */
export async function measureEtcd(place: BenchPlace, version: string | undefined, plan: RunPlan): Promise<EtcdMeasure> {
  if (version === undefined) {
    const reason = 'no `etcd` binary on PATH; install etcd (3.4 or later, e.g. the etcd-server package) to measure it';
    return { section: { status: 'skipped', reason }, series: new Map(), labels: new Map() };
  }
  const start = now();
  const suite = await etcdSuite(place);
  let series: Map<string, number[]>;
  try {
    series = await runInterleaved(suite.operations, plan);
  } finally {
    await suite.close();
  }
  const labels = new Map<string, string>();
  for (const operation of suite.operations) {
    labels.set(operation.id, operation.label);
    labels.set(`${operation.id}:acquire`, operation.label.replace('acquire + release', 'acquire'));
    labels.set(`${operation.id}:release`, operation.label.replace('acquire + release', 'release'));
  }
  const section: EtcdSection = {
    status: 'measured',
    version,
    members: { single: 1, cluster: CLUSTER_MEMBERS },
    rounds: plan.rounds,
    warmupRounds: plan.warmupRounds,
    figures: computeFigures(etcdFigureSpecs(), summariesOf(series), labels),
    durationMs: elapsed(start),
  };
  return { section, series, labels };
}
