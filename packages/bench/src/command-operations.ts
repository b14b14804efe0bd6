import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchPlace } from './fixtures.js';
import { timedAsync, type Operation } from './harness.js';

// The `leasehold` command as operators, scripts and shell prompts meet it: a
// whole process, from spawn to exit, against `node -e 0` spawned the same way
// in the same rounds. What the command adds to Node's own start-up is what
// a prompt that calls `status` pays every time.

/** The built `leasehold` command, where its package's manifest names it. */
function leaseholdBin(): string {
  const manifest = fileURLToPath(import.meta.resolve('@leasehold/cli/package.json'));
  const { bin } = JSON.parse(readFileSync(manifest, 'utf8')) as { bin: { leasehold: string } };
  return join(dirname(manifest), bin.leasehold);
}

/** Runs `node ARGS` to its end, asynchronously (an owner served by this process must go on answering); rejects on another exit status. */
function node(args: readonly string[], exitCode: number): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [...args], { env: { PATH: process.env.PATH ?? '' } }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      if (code === exitCode) resolve();
      else reject(new Error(`node ${args.join(' ')}: exit ${code}, not ${exitCode}: ${stdout}${stderr}`));
    });
  });
}

/** Where the command is measured: a running owner's workspace and state home (the transport suite's), and a state home for the rest. */
export interface CommandPlaces {
  readonly running: { readonly workspace: string; readonly stateHome: string };
}

/**
 * The command's operations: `--version`, `status` of a stopped workspace (made here: `leasehold run`
 * of a program that exits at once), `status` of the running owner, and `list` of its state home,
 * each beside `node -e 0`.
 */
export async function commandOperations(place: BenchPlace, { running }: CommandPlaces): Promise<Operation[]> {
  const bin = leaseholdBin();
  const stopped = { workspace: place.workspace(), stateHome: join(place.root, 'state-command') };
  const at = ({ workspace, stateHome }: { workspace: string; stateHome: string }) => [
    '--workspace',
    workspace,
    '--state-home',
    stateHome,
  ];
  await node([bin, 'run', ...at(stopped), '--', 'true'], 0);
  const operation = (id: string, label: string, args: readonly string[], exitCode = 0) =>
    timedAsync(id, label, { run: () => node(args, exitCode) });
  return [
    operation('node.bare', 'node -e 0, a whole process', ['-e', '0']),
    operation('command.version', 'leasehold --version', [bin, '--version']),
    operation(
      'command.status-stopped',
      'leasehold status, a stopped workspace (exit 3)',
      [bin, 'status', ...at(stopped)],
      3,
    ),
    operation('command.status-running', 'leasehold status, a running owner proved live over its transport', [
      bin,
      'status',
      ...at(running),
    ]),
    operation('command.list', 'leasehold list, one running owner', [bin, 'list', '--state-home', running.stateHome]),
  ];
}
