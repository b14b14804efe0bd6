import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { Tree, TreeNode } from './model.js';

/** The mutating system calls private-files makes (its `MutationAction`). */
export type TraceAction = 'mkdir' | 'chmod' | 'write' | 'fsync' | 'link' | 'rename' | 'unlink' | 'rmdir' | 'fsync-directory';

/** One recorded operation: `path` is the name it makes or touches; a link or rename comes from `source`; a write carries its bytes. */
export interface TraceOp {
  readonly op: TraceAction;
  readonly path: string;
  readonly source?: string;
  readonly bytes?: Uint8Array;
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
  };
}

/** One JSON line per op, `{"trace":{op,path,source?,bytes?}}` with the bytes in base64: fits beside a fixture's other JSON lines. */
export function encodeTrace(ops: readonly TraceOp[]): string {
  return ops
    .map(({ bytes, ...op }) => JSON.stringify({ trace: bytes === undefined ? op : { ...op, bytes: Buffer.from(bytes).toString('base64') } }))
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

const ACTIONS: readonly string[] = ['mkdir', 'chmod', 'write', 'fsync', 'link', 'rename', 'unlink', 'rmdir', 'fsync-directory'];

function decodedOp(trace: unknown, line: string): TraceOp {
  const { op, path, source, bytes } = (trace ?? {}) as Record<string, unknown>;
  const wellFormed =
    typeof op === 'string' &&
    ACTIONS.includes(op) &&
    typeof path === 'string' &&
    (source === undefined || typeof source === 'string') &&
    (bytes === undefined || typeof bytes === 'string');
  // A trace that cannot be read must fail the test, not shorten the trace.
  if (!wellFormed) throw new Error(`not a trace line: ${line}`);
  return {
    op: op as TraceAction,
    path,
    ...(source === undefined ? {} : { source }),
    ...(bytes === undefined ? {} : { bytes: new Uint8Array(Buffer.from(bytes, 'base64')) }),
  };
}

/**
 * The durable starting state of a trace: every entry below `folder` (which
 * must exist), taken before the first op runs. Files keep their bytes and
 * mode, and two names of one file (a hard link) keep sharing one `inode`.
 */
export function baseTree(folder: string): Tree {
  const entries: Record<string, TreeNode> = {};
  const visit = (relative: string): void => {
    const path = relative === '.' ? folder : join(folder, relative);
    const node = nodeAt(path);
    entries[relative] = node;
    if (node.kind !== 'folder') return;
    for (const name of readdirSync(path).sort()) visit(relative === '.' ? name : `${relative}/${name}`);
  };
  visit('.');
  if (entries['.']?.kind !== 'folder') throw new Error(`baseTree: ${folder} is not a folder`);
  return { root: folder, entries };
}

function nodeAt(path: string): TreeNode {
  const stats = lstatSync(path, { bigint: true });
  const mode = Number(stats.mode) & 0o7777;
  if (stats.isDirectory()) return { kind: 'folder', mode };
  if (stats.isFile()) return { kind: 'file', mode, bytes: new Uint8Array(readFileSync(path)), inode: `base:${stats.dev}:${stats.ino}` };
  if (stats.isSymbolicLink()) return { kind: 'symlink', target: readlinkSync(path) };
  // A FIFO or device has no bytes a crash could lose or keep: the model has no place for it.
  throw new Error(`baseTree: ${path} is neither a file, a folder nor a symbolic link`);
}
