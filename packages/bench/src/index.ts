// The benchmark's measuring kit, for anyone who wants to time another
// operation the same way `pnpm bench` does. The benchmark itself is `bench.js`.
export {
  elapsed,
  now,
  rotation,
  runInterleaved,
  timed,
  timedAsync,
  type AsyncSteps,
  type Operation,
  type Recorder,
  type RunPlan,
  type Steps,
} from './harness.js';
export { median, quantile, summarize, type Summary } from './statistics.js';
export { bareCreate, bareRemove, bareReplace, fsyncFolder, writeNewFile } from './bare-files.js';
export { formatDuration, type BenchResult, type ContentionResult, type Settings, type TargetRow } from './report.js';
export { type AvailabilityResult } from './availability.js';
export { type EtcdSection } from './etcd-operations.js';
export { type Figure, type FigureSpec, type JudgedRatio } from './figures.js';
export { type SyscallCount, type SyscallSection } from './syscalls.js';
export { type FsyncCount } from './fsync-counts.js';
export { type Machine } from './machine.js';
