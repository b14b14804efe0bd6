import { execFileSync } from 'node:child_process';
import { availableParallelism, cpus, release, tmpdir, totalmem } from 'node:os';

/** Where a run happened: the figures only mean something next to this. */
export interface Machine {
  readonly cpus: number;
  readonly model: string;
  readonly memoryGiB: number;
  readonly node: string;
  readonly kernel: string;
  readonly tmpdir: string;
  /** `df -T` of the temp folder: type, device and mount point. */
  readonly filesystem: string;
}

function filesystemOf(folder: string): string {
  try {
    const lines = execFileSync('df', ['-T', folder], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      .trim()
      .split('\n');
    const fields = lines[lines.length - 1]!.split(/\s+/);
    return `${fields[1]} (${fields[0]}, mounted on ${fields[fields.length - 1]})`;
  } catch {
    return 'unknown (df -T failed)';
  }
}

/** This machine, as far as Node and `df` tell. */
export function describeMachine(): Machine {
  return {
    cpus: availableParallelism(),
    model: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    kernel: `${process.platform} ${release()}`,
    tmpdir: tmpdir(),
    filesystem: filesystemOf(tmpdir()),
  };
}
