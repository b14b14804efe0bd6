import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import type { Operation } from './harness.js';

/** One function's share of a CPU profile. */
interface ProfileEntry {
  readonly name: string;
  /** Self time, in milliseconds. */
  readonly self: number;
  readonly percent: number;
}

/** Where one operation's time goes: by function and by area (package, node module, GC). */
export interface ProfileSummary {
  readonly operation: string;
  readonly samples: number;
  readonly totalMs: number;
  readonly functions: readonly ProfileEntry[];
  readonly areas: readonly ProfileEntry[];
}

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}

interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples?: readonly number[];
  readonly timeDeltas?: readonly number[];
}

function areaOf(frame: CallFrame): string {
  if (frame.url === '') return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  const workspace = /\/packages\/([^/]+)\//.exec(frame.url);
  if (workspace !== null && !frame.url.includes('/node_modules/')) return `@leasehold/${workspace[1]}`;
  const dependency = /\/node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)\//.exec(frame.url);
  if (dependency !== null) return dependency[1]!;
  if (frame.url.startsWith('node:')) return frame.url;
  return frame.url;
}

function nameOf(frame: CallFrame): string {
  const file = frame.url.split('/').pop() ?? '';
  const name = frame.functionName === '' ? '(anonymous)' : frame.functionName;
  return file === '' ? name : `${name} ${file}:${frame.lineNumber + 1}`;
}

function ranked(totals: Map<string, number>, total: number, limit: number): ProfileEntry[] {
  return [...totals]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([name, self]) => ({ name, self, percent: (100 * self) / total }));
}

/**
 * Runs `operation` `samples` times under the V8 CPU profiler of this process
 * and sums self time by function and by area. A system call shows as the
 * self time of the binding that made it (`fsync`, `lstat`, `open`). The
 * whole sample is profiled, its untimed preparation and clean-up included.
 * With `output`, also writes the raw `.cpuprofile` (open it in Chrome
 * DevTools or speedscope).
 */
export async function profileOperation(
  operation: Operation,
  samples: number,
  output?: string,
): Promise<ProfileSummary> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 50 });
    await session.post('Profiler.start');
    for (let index = 0; index < samples; index += 1) await operation.sample(() => undefined);
    const { profile } = (await session.post('Profiler.stop')) as { profile: CpuProfile };
    if (output !== undefined) writeFileSync(output, JSON.stringify(profile));
    const byId = new Map(profile.nodes.map((node) => [node.id, node]));
    const functions = new Map<string, number>();
    const areas = new Map<string, number>();
    let total = 0;
    const ids = profile.samples ?? [];
    const deltas = profile.timeDeltas ?? [];
    ids.forEach((id, index) => {
      const node = byId.get(id);
      // The delta after a sample is the time spent where that sample landed.
      const milliseconds = (deltas[index + 1] ?? 0) / 1000;
      if (node === undefined || node.callFrame.functionName === '(idle)') return;
      total += milliseconds;
      const name = nameOf(node.callFrame);
      functions.set(name, (functions.get(name) ?? 0) + milliseconds);
      const area = areaOf(node.callFrame);
      areas.set(area, (areas.get(area) ?? 0) + milliseconds);
    });
    return {
      operation: operation.id,
      samples,
      totalMs: total,
      functions: ranked(functions, total, 25),
      areas: ranked(areas, total, 15),
    };
  } finally {
    session.disconnect();
  }
}

/** The summary as text: areas, then the functions with the most self time. */
export function formatProfile(summary: ProfileSummary): string {
  const line = (entry: ProfileEntry) =>
    `  ${entry.percent.toFixed(1).padStart(5)}%  ${entry.self.toFixed(1).padStart(9)} ms  ${entry.name}`;
  return [
    `Profile of ${summary.operation}: ${summary.samples} whole samples (untimed preparation and clean-up included), ` +
      `${summary.totalMs.toFixed(0)} ms on the CPU or in system calls (idle excluded)`,
    'Self time by area:',
    ...summary.areas.map(line),
    'Self time by function (top 25):',
    ...summary.functions.map(line),
  ].join('\n');
}
