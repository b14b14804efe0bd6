import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { BIN, Background, cleanEnv, killAll, removeSandboxes, sandbox, type Result } from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';
import { shellQuote } from '@leasehold/contracts';
import { codeBlocks, markdownSection } from '@leasehold/package-checks';

// The root README's "A short tour", run as printed: every line of its sh blocks, in order, each
// checked against its comment (the phrases it prints, and its exit status). The repository is
// stood in for by a temporary workspace, with a temporary state home.
const README = fileURLToPath(new URL('../../../README.md', import.meta.url));
const ROOT_PACKAGE = fileURLToPath(new URL('../../../package.json', import.meta.url));

afterEach(async () => {
  await killAll();
  removeSandboxes();
  expect(capabilityLeaks()).toEqual([]);
});

/** One line of the tour: the command as printed, the phrases its comment says it prints, and its exit status. */
interface TourLine {
  readonly command: string;
  readonly phrases: readonly string[];
  /** Absent for a line that serves until stopped (it has phrases) and for a silent one (it has none). */
  readonly exit?: number;
}

/** `command  # phrase, phrase (exit N)`, as the tour's introduction explains it. */
function tourLine(line: string): TourLine {
  const [, command = '', comment = ''] = /^(.*?)(?:\s+# (.*))?$/.exec(line) ?? [];
  const exit = /\s*\(exit (\d+)\)$/.exec(comment);
  const words = exit === null ? comment : comment.slice(0, exit.index);
  return {
    command,
    phrases: words === '' ? [] : words.split(', '),
    ...(exit === null ? {} : { exit: Number(exit[1]) }),
  };
}

/** Every line of the tour's sh blocks, in order. */
function tourLines(): TourLine[] {
  return codeBlocks(markdownSection(readFileSync(README, 'utf8'), '## A short tour'), 'sh').flatMap((block) =>
    block
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map(tourLine),
  );
}

/**
 * What a root script runs once built (its last command: `pnpm start` builds first), with the
 * built `leasehold` by its absolute path, so that it runs from any folder.
 */
function builtCommand(name: string): string {
  const script =
    (JSON.parse(readFileSync(ROOT_PACKAGE, 'utf8')) as { scripts: Record<string, string> }).scripts[name] ?? '';
  const last = script.split(' && ').at(-1) ?? '';
  const built = 'node packages/cli/dist/leasehold.cjs';
  if (!last.startsWith(built)) throw new Error(`${ROOT_PACKAGE}: script ${name} does not end in ${built}: ${script}`);
  return `${shellQuote(process.execPath)} ${shellQuote(BIN)}${last.slice(built.length)}`;
}

/** What the tour's placeholders stand for, from earlier lines' output. */
interface Bindings {
  pid?: string | undefined;
  digest?: string | undefined;
}

/** `<pid>` and the token `D`, replaced by what they stand for; a placeholder nothing printed yet fails the test. */
function substituted(text: string, bindings: Bindings): string {
  const bound = (value: string | undefined, name: string) => {
    if (value === undefined) throw new Error(`the tour uses ${name} before a line printed it: ${text}`);
    return value;
  };
  return text
    .replace(/<pid>/g, () => bound(bindings.pid, '<pid>'))
    .replace(/(?<=^|\s)D(?=\s|$)/g, () => bound(bindings.digest, 'D'));
}

/** The command line as the shell runs it here: the repository's `pnpm` scripts mapped to what they run. */
function shellCommand(command: string, bindings: Bindings): string {
  const scripts: ReadonlyArray<readonly [string, string]> = [
    ['pnpm -s leasehold', 'leasehold'],
    ['pnpm start', 'start'],
  ];
  const line = substituted(command, bindings);
  for (const [prefix, script] of scripts) {
    if (line === prefix || line.startsWith(`${prefix} `)) return `${builtCommand(script)}${line.slice(prefix.length)}`;
  }
  if (line.startsWith('pnpm')) throw new Error(`no mapping for ${command}`);
  return line;
}

/** A phrase of a comment as a pattern: `…` any text on one line, a space any run of blanks (tables align their columns). */
function phrasePattern(phrase: string): RegExp {
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const body = phrase
    .split('…')
    .map((part) => part.split(' ').map(escape).join('[ \\t]+'))
    .join('[^\\n]*');
  // Whole words: `pid 123` is not found in `pid 1234`.
  return new RegExp(`${/^\w/.test(phrase) ? '(?<!\\w)' : ''}${body}${/\w$/.test(phrase) ? '(?!\\w)' : ''}`);
}

function missingPhrases(output: string, phrases: readonly string[], bindings: Bindings): string[] {
  return phrases.filter((phrase) => !phrasePattern(substituted(phrase, bindings)).test(output));
}

/** SIGKILL to process group `pid` (a program `run` started), unless it is gone already. */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

describe("the root README's short tour, run as printed", () => {
  it('serves, stops, crashes, is refused, recovers, recovers a proved-dead owner itself, and runs a program as the owner', async () => {
    const lines = tourLines();
    const commands = lines.map(({ command }) => command);
    expect(commands).toEqual(
      expect.arrayContaining(['kill -9 <pid>', 'pnpm -s leasehold serve --recover-dead', 'pnpm -s leasehold stop']),
    );
    expect(commands.some((command) => command.startsWith('pnpm -s leasehold run -- '))).toBe(true);

    const box = sandbox();
    const options = { cwd: box.workspace('repository'), env: cleanEnv({ LEASEHOLD_STATE_HOME: box.stateHome }) };
    const bindings: Bindings = {};
    // The line serving now (the first terminal's), if any.
    let server: Background | undefined;

    for (const { command, phrases, exit } of lines) {
      const shell = shellCommand(command, bindings);
      const where = `${command}\n(ran: ${shell})`;
      if (exit === undefined && phrases.length > 0) {
        expect(server, `${where}: another line still serves`).toBeUndefined();
        // `exec`: the process is the owner itself, as a terminal's foreground job is.
        const serving = new Background('/bin/sh', ['-c', `exec ${shell}`], options);
        server = serving;
        // Its ready block is out, and every phrase with it.
        await serving.until(
          (stdout) =>
            /^Stop it with .*\n/m.test(stdout) && missingPhrases(stdout, phrases, bindings).length === 0
              ? true
              : undefined,
          `${where}: ${phrases.join(', ')}`,
        );
        box.recordCapabilities();
        const program = /^child pid +(\d+)$/m.exec(serving.stdout)?.[1];
        if (program !== undefined) onTestFinished(() => killGroup(Number(program)));
        bindings.pid = /^pid +(\d+)$/m.exec(serving.stdout)?.[1];
        expect(Number(bindings.pid), where).toBe(serving.pid);
        continue;
      }
      const ended: Result = await new Background('/bin/sh', ['-c', shell], options).exit();
      const output = `${ended.stdout}${ended.stderr}`;
      expect({ code: ended.code, missing: missingPhrases(output, phrases, bindings) }, `${where}\n${output}`).toEqual({
        code: exit ?? 0,
        missing: [],
      });
      if (phrases.length === 0) expect(output, where).toBe('');
      bindings.digest = /^digest +([0-9a-f]{64})$/m.exec(ended.stdout)?.[1] ?? bindings.digest;

      // What ends the serving line: a kill -9 of its pid ends the owner itself, a stop ends it cleanly.
      if (command.startsWith('kill -9 ')) {
        expect((await server?.exit())?.signal, where).toBe('SIGKILL');
        server = undefined;
      } else if (/\bleasehold stop\b/.test(command)) {
        const stopped = await server?.exit();
        expect({ code: stopped?.code, last: stopped?.stdout.trimEnd().split('\n').at(-1) }, where).toEqual({
          code: 0,
          last: expect.stringMatching(/^stopped /),
        });
        server = undefined;
      }
    }
    // The tour leaves nothing serving.
    expect(server).toBeUndefined();
  });
});
