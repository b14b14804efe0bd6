import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { CommandContext } from './context.js';
import { createOutput, type Streams } from './output.js';
import { asInvoked } from './invocation.js';
import { VERIFY_FS_WORKER, verifyFsWorker } from './verify-fs-worker.js';
import { shellQuote } from '@leasehold/contracts';

type OptionSpec = { type: 'string' | 'boolean'; short?: string };

interface Command {
  readonly summary: string;
  readonly usage: string;
  readonly options: Record<string, OptionSpec>;
  readonly help: readonly string[];
  /** Everything after the first `--` is a program to run, never parsed; one must be given. */
  readonly takesProgram?: boolean;
  /**
   * The command's code, imported only when it runs: `--version`, `--help` and a usage error load
   * none of the layers below (nor zod), and a command loads only what it uses.
   */
  readonly load: () => Promise<(context: CommandContext) => Promise<number>>;
}

const COMMON: Record<string, OptionSpec> = {
  workspace: { type: 'string' },
  'state-home': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

const COMMON_HELP = [
  '  --workspace DIR     the workspace folder (default: the current folder)',
  '  --state-home DIR    the state home (default: $LEASEHOLD_STATE_HOME, $XDG_STATE_HOME/leasehold, ~/.local/state/leasehold)',
  '  --json              one JSON object per line instead of text for a person',
  '  --help              this help',
];

/** What `serve` and `run` both take: how the owner is started and served. */
const OWNER_OPTIONS: Record<string, OptionSpec> = {
  endpoint: { type: 'string' },
  compatibility: { type: 'string' },
  'recover-dead': { type: 'boolean' },
  'replace-config': { type: 'boolean' },
  'watch-ms': { type: 'string' },
  'lease-ttl': { type: 'string' },
  wait: { type: 'string' },
};

const COMMANDS: Record<string, Command> = {
  init: {
    summary: 'record which backend the state home uses: its files (the default), or an etcd cluster shared by hosts',
    usage: 'leasehold init [--etcd-endpoints URL[,URL...] --etcd-prefix PREFIX] [--allow-fs NAME] [options]',
    options: {
      'etcd-endpoints': { type: 'string' },
      'etcd-prefix': { type: 'string' },
      'allow-fs': { type: 'string' },
    },
    help: [
      '  --allow-fs NAME     allow the state home on file system NAME, whose guarantees are not proven',
      "                      (as doctor names it: nfs, fuse, 0x858458f6, ...), once doctor --verify-fs's",
      '                      check, run first, passed there; the file backend only',
      "  --etcd-endpoints U  the etcd members' client URLs, comma-separated (http://HOST:2379 or https://...)",
      '  --etcd-prefix P     the key prefix of this state home in etcd, such as /leasehold/team',
      '                      credentials come from LEASEHOLD_ETCD_USER and LEASEHOLD_ETCD_PASSWORD, TLS from',
      '                      LEASEHOLD_ETCD_CA, LEASEHOLD_ETCD_CERT and LEASEHOLD_ETCD_KEY (PEM files); never recorded.',
      '                      This host is named by LEASEHOLD_HOST (default: its host name).',
    ],
    load: () => import('./commands/init.js').then(({ init }) => init),
  },
  serve: {
    summary: 'own the workspace and serve it on a loopback endpoint until stopped',
    usage:
      'leasehold serve [--endpoint URL] [--compatibility TEXT] [--recover-dead] [--replace-config] [--wait DURATION] [--watch-ms N] [--lease-ttl S] [options]',
    options: OWNER_OPTIONS,
    help: [
      '  --endpoint URL      http://127.0.0.1:PORT or http://[::1]:PORT; port 0 is any free port (default http://127.0.0.1:0)',
      "  --compatibility T   what clients this owner serves (a protocol version, say), shown by status; a client's",
      '                      connectOrStart({ compatibility }) refuses or replaces an owner of another',
      '  --recover-dead      when a crashed owner blocks the start and every process its fences name is proved gone',
      '                      on this host, recover it first (journalled as automatic); anything else stays refused',
      '  --replace-config    a stopped workspace that keeps another config (another --endpoint, an earlier version) takes this one',
      '  --wait DURATION     wait up to DURATION (30s, 5m, 500ms; a bare number is seconds) for a live owner to',
      '                      release, first come, first served, showing who holds it; a crashed owner is never waited for',
      '  --watch-ms N        how often the server re-checks its files, in ms (default 1000)',
      "  --lease-ttl S       etcd backend only: the lease's time to live in seconds (default 10)",
    ],
    load: () => import('./commands/serve.js').then(({ serve }) => serve),
  },
  run: {
    summary: 'own the workspace like serve, and run a program as its owner until either stops',
    usage:
      'leasehold run [--endpoint URL] [--compatibility TEXT] [--recover-dead] [--replace-config] [--wait DURATION] [--stop-timeout S] [--watch-ms N] [--lease-ttl S] [options] -- CMD [ARGS...]',
    options: { ...OWNER_OPTIONS, 'stop-timeout': { type: 'string' } },
    help: [
      "  --stop-timeout S    on a stop, seconds from SIGTERM to SIGKILL of the program's process group (default 10)",
      '  --endpoint URL, --compatibility T, --recover-dead, --replace-config, --wait D, --watch-ms N, --lease-ttl S:',
      '                      as for serve (leasehold serve --help)',
      '  -- CMD [ARGS...]    the program: started in its own process group once the workspace is fenced with it too,',
      '                      with LEASEHOLD_WORKSPACE, LEASEHOLD_STATE_HOME, LEASEHOLD_EPOCH and LEASEHOLD_ENDPOINT set;',
      '                      exit: its status when it ends by itself (128 + signal when killed; 127 not found,',
      '                      126 not executable, as a shell says), 0 after a stop, 4 after a lost lease (its process',
      "                      group killed first); if run itself is killed, its watcher ends the program's group",
    ],
    takesProgram: true,
    load: () => import('./commands/run.js').then(({ run }) => run),
  },
  status: {
    summary: 'is the workspace running? (exit 0 running, 3 not running, 1 error)',
    usage: 'leasehold status [--watch [--poll-ms N]] [options]',
    options: { watch: { type: 'boolean' }, 'poll-ms': { type: 'string' } },
    help: [
      '  --watch             a line (with --json, a JSON line) for each change, until interrupted (exit 0)',
      '  --poll-ms N         with --watch: how often it reads even without a notification, in ms (default 1000)',
    ],
    load: () => import('./commands/status.js').then(({ status }) => status),
  },
  stop: {
    summary: 'ask the owner to stop (or, with --ask, to hand over), and wait until the workspace is stopped',
    usage: 'leasehold stop [--ask [--reason TEXT]] [--stop-timeout S] [options]',
    options: { ask: { type: 'boolean' }, reason: { type: 'string' }, 'stop-timeout': { type: 'string' } },
    help: [
      '  --ask               ask the owner to hand the workspace over instead: it releases now, releases after its',
      '                      current work (stop waits for it), or refuses with its reason (exit 1, conflict)',
      '  --reason TEXT       with --ask: why you want it, shown to the owner (1 to 200 printable characters)',
      '  --stop-timeout S    for a program `leasehold run` left running when its process went (status names it), which stop',
      '                      ends: seconds from SIGTERM to SIGKILL of its process group (default 10)',
    ],
    load: () => import('./commands/stop.js').then(({ stop }) => stop),
  },
  list: {
    summary: 'every workspace registered in the state home, with its owner',
    usage: 'leasehold list [--all] [options]',
    options: { all: { type: 'boolean' } },
    help: ['  --all               stopped workspaces too: every workspace this host keeps files for'],
    load: () => import('./commands/list.js').then(({ list }) => list),
  },
  recover: {
    summary: "show a crashed owner's fences and digest; with --digest and --yes, release them",
    usage: 'leasehold recover [--all-dead] [--digest D] [--yes] [options]',
    options: { 'all-dead': { type: 'boolean' }, digest: { type: 'string' }, yes: { type: 'boolean', short: 'y' } },
    help: [
      '  --all-dead          every workspace of the state home whose holders are all proved gone on this host',
      '                      (after a reboot), with one digest over all of them; not only --workspace',
      '  --digest D          act on exactly the state with this digest (shown by `leasehold recover`)',
      '  --yes               do not ask for confirmation',
    ],
    load: () => import('./commands/recover.js').then(({ recover }) => recover),
  },
  journal: {
    summary:
      'every recovery journalled in the state home: when, which workspace, which digest, who ran it or who was proved gone',
    usage: 'leasehold journal [--workspace DIR] [options]',
    options: {},
    help: ["  (with --workspace, only that workspace's recoveries; without it, every workspace's)"],
    load: () => import('./commands/journal.js').then(({ journal }) => journal),
  },
  doctor: {
    summary: 'find what blocks Leasehold in the state home, and the command that fixes each',
    usage: 'leasehold doctor [--verify-fs [--processes N] [--seconds S]] [options]',
    options: { 'verify-fs': { type: 'boolean' }, processes: { type: 'string' }, seconds: { type: 'string' } },
    help: [
      "  --verify-fs         instead: prove Leasehold's guarantees on the state home's file system, racing",
      '                      processes on a counter in a scratch folder there (exit 3 when they fail)',
      '  --processes N       --verify-fs: how many processes race, 2 to 64 (default 4)',
      '  --seconds S         --verify-fs: how long they race, 1 to 600 seconds (default 5)',
    ],
    load: () => import('./commands/doctor.js').then(({ doctor }) => doctor),
  },
};

/** The commands that are about a whole state home, not one workspace: their remedies name no workspace. */
const NO_WORKSPACE = new Set(['init', 'list', 'doctor']);

function overview(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  return [
    'leasehold: one owner per workspace folder, safe after any crash',
    '',
    'usage: leasehold <command> [options]',
    '',
    ...Object.entries(COMMANDS).map(([name, command]) => `  ${name.padEnd(width)}  ${command.summary}`),
    '',
    'Run `leasehold <command> --help` for its options.',
  ].join('\n');
}

function commandHelp(name: string, command: Command): string {
  return [`${command.usage}`, '', command.summary, '', 'options:', ...command.help, ...COMMON_HELP].join('\n');
}

/** Standard streams and the process's environment, as `main` uses them. */
export interface MainIO extends Streams {
  readonly stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
}

async function reportError(
  io: MainIO,
  context: CommandContext,
  takesWorkspace: boolean,
  error: unknown,
): Promise<number> {
  const json = context.values.json === true;
  const [{ UsageError, problemOf, interruptingSignal, signalExit }, { whereOf }] = await Promise.all([
    import('./remedies.js'),
    import('./context.js'),
  ]);
  if (error instanceof UsageError) return usageError(io, json, error.message, error.remedy);
  // A stop signal that ended a wait is no conflict: the person interrupted it, as a shell tells (130 for Ctrl-C).
  const signal = interruptingSignal(error);
  if (signal !== undefined) {
    const { message } = error as Error;
    if (json) io.stdout.write(`${JSON.stringify({ error: 'interrupted', signal, message })}\n`);
    else io.stderr.write(`leasehold: interrupted (${signal}): ${message}\n`);
    return signalExit(signal);
  }
  const { code, message, path, remedy } = problemOf(error, whereOf(context, takesWorkspace));
  if (json)
    io.stdout.write(
      `${JSON.stringify({ error: code, message, ...(path === undefined ? {} : { path }), ...(remedy === undefined ? {} : { remedy }) })}\n`,
    );
  else io.stderr.write(`leasehold: ${code}: ${message}\n${remedy === undefined ? '' : `  ${remedy}\n`}`);
  return 1;
}

/**
 * Runs one `leasehold` command line and answers its exit status: 0 done
 * (or running), 1 an error, 2 a usage error, 3 not running (status) or
 * findings (doctor), 4 a server whose lease was lost.
 */
export async function main(argv: readonly string[], given: MainIO): Promise<number> {
  // Every remedy and next step printed as the command was invoked (`npx leasehold …`, `pnpm leasehold …`).
  const io = asInvoked(given);
  const [name, ...rest] = argv;
  if (name === VERIFY_FS_WORKER) return verifyFsWorker(io.stderr);
  if (name === 'help' && rest.length > 0) return helpOf(io, rest);
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout.write(`${overview()}\n`);
    return name === undefined ? 2 : 0;
  }
  if (name === '--version') {
    io.stdout.write(`${version()}\n`);
    return 0;
  }
  const command = COMMANDS[name];
  const { options, program } =
    command?.takesProgram === true ? splitProgram(rest) : { options: rest, program: undefined };
  const json = options.includes('--json') || name === '--json';
  if (command === undefined) {
    const after = commandAfterOptions(argv);
    if (after !== undefined) {
      return usageError(io, json, `options go after the command: ${argv.join(' ')}`, `run: leasehold ${after}`);
    }
    const near = nearestCommand(name);
    const remedy =
      near === undefined ? 'run `leasehold --help` for the commands' : `did you mean \`leasehold ${near}\`?`;
    return usageError(io, json, `unknown command '${name}'`, remedy, overview());
  }
  const help = commandHelp(name, command);
  let values: CommandContext['values'];
  try {
    values = parseArgs({
      args: [...options],
      options: { ...COMMON, ...command.options },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    // Without a `--`, the program's words read as stray arguments: say what is missing instead.
    if (command.takesProgram === true && program === undefined) return noProgram(io, json, name, help);
    return usageError(io, json, optionsProblem(error), `run \`leasehold ${name} --help\` for its options`, help);
  }
  if (values.help === true) {
    io.stdout.write(`${help}\n`);
    return 0;
  }
  if (command.takesProgram === true && (program === undefined || program.length === 0))
    return noProgram(io, json, name, help);
  const context: CommandContext = {
    output: createOutput(io, values.json === true),
    streams: io,
    cwd: io.cwd,
    env: io.env,
    values,
    ...(program === undefined ? {} : { program }),
    command: commandFile(),
  };
  try {
    const run = await command.load();
    return await run(context);
  } catch (error) {
    return reportError(io, context, !NO_WORKSPACE.has(name), error);
  }
}

/** `leasehold help CMD`: that command's help, as `leasehold CMD --help` prints it. */
function helpOf(io: MainIO, [name, ...extra]: readonly string[]): number {
  const command = name === undefined ? undefined : COMMANDS[name];
  if (command === undefined || extra.length > 0) {
    const near = name === undefined ? undefined : nearestCommand(name);
    const remedy =
      near === undefined ? 'run `leasehold --help` for the commands' : `did you mean \`leasehold help ${near}\`?`;
    return usageError(io, false, `help: no command '${[name, ...extra].join(' ')}'`, remedy, overview());
  }
  io.stdout.write(`${commandHelp(name!, command)}\n`);
  return 0;
}

/** The command a mistyped `word` most likely meant: one edit away (a letter added, dropped, changed or two swapped), else none. */
function nearestCommand(word: string): string | undefined {
  return Object.keys(COMMANDS).find((candidate) => editDistance(word, candidate) <= 1);
}

/** The optimal-string-alignment distance: insertions, deletions, substitutions and swaps of two neighbours. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i += 1) {
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = best;
    }
  }
  return rows[a.length]![b.length]!;
}

/**
 * For a command line that starts with options (`leasehold --json status`): the same command line
 * with the command first, when a known command follows them; else undefined.
 */
function commandAfterOptions(argv: readonly string[]): string | undefined {
  const at = argv.findIndex((word) => Object.hasOwn(COMMANDS, word));
  if (at <= 0 || !argv[0]!.startsWith('-')) return undefined;
  return [argv[at]!, ...argv.slice(0, at), ...argv.slice(at + 1)].map(shellQuote).join(' ');
}

/** What parseArgs found wrong, in the command's words (its own message for a value that starts with a dash misleads). */
function optionsProblem(error: unknown): string {
  if (!(error instanceof Error)) return 'bad options';
  const dashed = /^Option '(--[\w-]+)[^']*' argument is ambiguous/.exec(error.message);
  if (dashed !== null)
    return `${dashed[1]!}: its value starts with a dash; to give such a value, write ${dashed[1]!}=VALUE`;
  return error.message.split('\n')[0]!;
}

/** The options before the first `--`, and the program after it (undefined without a `--`). */
function splitProgram(args: readonly string[]): { options: readonly string[]; program: readonly string[] | undefined } {
  const separator = args.indexOf('--');
  return separator === -1
    ? { options: args, program: undefined }
    : { options: args.slice(0, separator), program: args.slice(separator + 1) };
}

/**
 * This command's version, from the package.json it ships with. Read with `require`, not `node:fs`:
 * an ES import of `node:fs` loads Node's whole stream stack, a fifth of `--version`'s start-up.
 */
function version(): string {
  const manifest = createRequire(import.meta.url)('../package.json') as { version: string };
  return manifest.version;
}

function noProgram(io: MainIO, json: boolean, name: string, help: string): number {
  return usageError(
    io,
    json,
    `${name}: no program given after --`,
    `give it after --, as in: leasehold ${name} -- CMD [ARGS...]`,
    help,
  );
}

/**
 * The command's own entry file, `dist/leasehold.cjs`: beside this module both in the bundle (whose
 * entry holds it) and in the library a program embeds (`dist/main.js`), as `version`'s package.json
 * is above it in both. Never `process.argv[1]`, which names whatever program called `main`.
 */
function commandFile(): string {
  return fileURLToPath(new URL('./leasehold.cjs', import.meta.url));
}

/** Exit status 2: the command line itself is wrong. Nothing was opened or changed. */
function usageError(io: MainIO, json: boolean, message: string, remedy: string, help?: string): number {
  if (json) io.stdout.write(`${JSON.stringify({ error: 'usage', message, remedy })}\n`);
  else io.stderr.write(`leasehold: usage: ${message}\n  ${remedy}\n${help === undefined ? '' : `\n${help}\n`}`);
  return 2;
}
