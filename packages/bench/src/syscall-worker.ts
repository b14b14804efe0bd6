import { accessSync } from 'node:fs';
import { fileOwnership } from '@leasehold/coordination';
import { bareReplay } from './bare-replay.js';
import { CONFIG } from './fixtures.js';
import { parseSyscallWorkerArgument } from './syscalls.js';

// The process `strace -f` watches for section 7's system calls: warm-up
// cycles, a marker, the counted cycles, a marker, exit. A cycle is a reused
// workspace's acquire + release (as production runs it: no hooks), or the bare
// replay of the same publications. A marker is an `access()` of a path that
// does not exist, which the trace shows by name.

const options = parseSyscallWorkerArgument(process.argv[2]);

async function leaseholdCycle(stateHome: string, workspace: string, endpoint: string): Promise<() => Promise<void>> {
  const ownership = fileOwnership({ stateHome });
  return async () => {
    const lease = await ownership.acquire(workspace, CONFIG, { boundEndpoint: endpoint });
    await lease.release();
  };
}

function mark(path: string): void {
  try {
    accessSync(path);
  } catch {
    // Absent, as it should be: the call itself is the marker.
  }
}

const cycle =
  options.mode === 'leasehold'
    ? await leaseholdCycle(options.stateHome, options.workspace, options.endpoint)
    : (() => {
        const replay = bareReplay(options, options.sequence);
        return async () => void replay();
      })();
for (let index = 0; index < options.warmupCycles; index += 1) await cycle();
mark(`${options.marker}-start`);
for (let index = 0; index < options.cycles; index += 1) await cycle();
mark(`${options.marker}-end`);
