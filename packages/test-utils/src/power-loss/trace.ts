// Recording a trace: the file-system ops a run of private-files makes, taken from its
// `beforeMutation` hook, and their encoding as JSON lines so that a child process can hand
// them over on its stdout.
/** The mutating system calls private-files makes (its `MutationAction`). */
export type TraceAction =
  'mkdir' | 'chmod' | 'write' | 'fsync' | 'link' | 'rename' | 'unlink' | 'rmdir' | 'fsync-directory';

/** One recorded operation: `path` is the name it makes or touches; a link or rename comes from `source`; a write carries its bytes. */
export interface TraceOp {
  readonly op: TraceAction;
  readonly path: string;
  readonly source?: string;
  readonly bytes?: Uint8Array;
  /** The permission bits of the folder or file the op makes, when not a private one's (0700, 0600). */
  readonly mode?: number;
}

/**
 * The part of private-files' `MutationStep` the recorder reads. It is stated
 * here rather than imported: this package may depend on contracts only (the
 * layer check), and a `TraceHooks` is still a valid `PrivateFilesHooks`.
 */
export interface TracedStep {
  readonly action: TraceAction;
  readonly path: string;
  readonly source?: string;
  readonly bytes?: Uint8Array;
  readonly mode?: number;
}

/** A private-files hook (pass it as `hooks`) that records every step it is told about. */
export interface TraceHooks {
  beforeMutation(step: TracedStep): void;
}

/** A recorder: the hooks to pass to private-files (or any package that forwards them) and the ops recorded so far. */
export interface TraceRecorder {
  readonly hooks: TraceHooks;
  readonly ops: TraceOp[];
}

/**
 * Records each step as it is attempted: the hook runs before the system
 * call, so an op that then fails is recorded too (record runs that succeed).
 * With `emit`, each op is also handed over as one encoded line as it is
 * recorded, so a child process can print its trace while it runs.
 */
export function recordTrace(emit?: (line: string) => void): TraceRecorder {
  const ops: TraceOp[] = [];
  const hooks: TraceHooks = {
    beforeMutation(step) {
      const op = opOf(step);
      ops.push(op);
      emit?.(encodeTrace([op]));
    },
  };
  return { hooks, ops };
}

/** The op of a step, with a copy of its bytes: the caller's array is its own to change afterwards. */
function opOf(step: TracedStep): TraceOp {
  return {
    op: step.action,
    path: step.path,
    ...(step.source === undefined ? {} : { source: step.source }),
    ...(step.bytes === undefined ? {} : { bytes: Uint8Array.from(step.bytes) }),
    ...(step.mode === undefined ? {} : { mode: step.mode }),
  };
}

/** One JSON line per op, `{"trace":{op,path,source?,bytes?}}` with the bytes in base64: fits beside a fixture's other JSON lines. */
export function encodeTrace(ops: readonly TraceOp[]): string {
  return ops
    .map(({ bytes, ...op }) =>
      JSON.stringify({ trace: bytes === undefined ? op : { ...op, bytes: Buffer.from(bytes).toString('base64') } }),
    )
    .join('\n');
}

/** The ops in a text or in lines (a child's stdout), in order; lines that are not trace lines are skipped. */
export function decodeTrace(lines: string | readonly string[]): TraceOp[] {
  const all = typeof lines === 'string' ? lines.split('\n') : lines;
  return all.flatMap((line) => {
    const trace = traceField(line);
    return trace === undefined ? [] : [decodedOp(trace, line)];
  });
}

/** The `trace` field of a JSON line, or undefined for any other line. */
function traceField(line: string): unknown {
  try {
    const message = JSON.parse(line) as unknown;
    return typeof message === 'object' && message !== null && 'trace' in message ? message.trace : undefined;
  } catch {
    return undefined;
  }
}

const ACTIONS: readonly string[] = [
  'mkdir',
  'chmod',
  'write',
  'fsync',
  'link',
  'rename',
  'unlink',
  'rmdir',
  'fsync-directory',
];

function decodedOp(trace: unknown, line: string): TraceOp {
  const { op, path, source, bytes, mode } = (trace ?? {}) as Record<string, unknown>;
  const wellFormed =
    typeof op === 'string' &&
    ACTIONS.includes(op) &&
    typeof path === 'string' &&
    (source === undefined || typeof source === 'string') &&
    (bytes === undefined || typeof bytes === 'string') &&
    (mode === undefined || (typeof mode === 'number' && Number.isInteger(mode)));
  // A trace that cannot be read must fail the test, not shorten the trace.
  if (!wellFormed) throw new Error(`not a trace line: ${line}`);
  return {
    op: op as TraceAction,
    path,
    ...(source === undefined ? {} : { source }),
    ...(bytes === undefined ? {} : { bytes: new Uint8Array(Buffer.from(bytes, 'base64')) }),
    ...(mode === undefined ? {} : { mode }),
  };
}
