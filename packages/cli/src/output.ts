/** Where a command writes: standard output and error, and whether JSON was asked for. */
export interface Output {
  readonly json: boolean;
  /** One JSON object per line with --json. */
  record(value: Record<string, unknown>): void;
  /** Human lines (ignored with --json). */
  say(...lines: string[]): void;
  /** Human lines to standard error (ignored with --json). */
  warn(...lines: string[]): void;
}

export interface Streams {
  readonly stdout: { write(chunk: string): unknown };
  readonly stderr: { write(chunk: string): unknown };
}

export function createOutput(streams: Streams, json: boolean): Output {
  return {
    json,
    record: (value) => {
      if (json) streams.stdout.write(`${JSON.stringify(value)}\n`);
    },
    say: (...lines) => {
      if (!json) streams.stdout.write(lines.map((line) => `${line}\n`).join(''));
    },
    warn: (...lines) => {
      if (!json) streams.stderr.write(lines.map((line) => `${line}\n`).join(''));
    },
  };
}

/** Aligns `label  value` rows for a person at a terminal. */
export function table(rows: ReadonlyArray<readonly [string, string]>): string[] {
  const width = Math.max(0, ...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `${label.padEnd(width)}  ${value}`);
}
