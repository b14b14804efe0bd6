import { createHash } from 'node:crypto';
import type { z } from 'zod';
import { ContractError } from './contract-error.js';
import { MAX_DEPTH, parseJsonText } from './json-parser.js';
import { formatPath } from './json-path.js';

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const utf8Encoder = new TextEncoder();

// The text of a frozen record whose members are all primitives (a table's row, decoded once and
// frozen) cannot change: it is kept, so that writing a table of 256 rows costs one join, not 256
// sorts of keys.
const frozenRecords = new WeakMap<object, string>();

function canonical(value: unknown, depth: number): string {
  if (value === null || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new ContractError('refused', 'encode: a number is not finite');
    return JSON.stringify(value);
  }
  if (depth >= MAX_DEPTH) throw new ContractError('refused', `encode: nesting deeper than ${MAX_DEPTH}`);
  if (Array.isArray(value)) {
    // Array.from visits holes too (map skips them, and join would then write `[1,,2]`).
    return `[${Array.from(value, (item) => (item === undefined ? refuseUndefined() : canonical(item, depth + 1))).join(',')}]`;
  }
  const prototype: unknown = typeof value === 'object' ? Object.getPrototypeOf(value) : undefined;
  if (prototype !== Object.prototype && prototype !== null) {
    throw new ContractError('refused', 'encode: not a plain JSON value');
  }
  const record = value as Record<string, unknown>;
  const known = frozenRecords.get(record);
  if (known !== undefined) return known;
  const keys = Object.keys(record)
    .sort()
    .filter((key) => record[key] !== undefined);
  const text = `{${keys.map((key) => `${JSON.stringify(key)}:${canonical(record[key], depth + 1)}`).join(',')}}`;
  if (Object.isFrozen(record) && keys.every((key) => typeof record[key] !== 'object')) frozenRecords.set(record, text);
  return text;
}

function refuseUndefined(): never {
  throw new ContractError('refused', 'encode: an array holds undefined or a hole');
}

/**
 * Canonical JSON: UTF-8, keys sorted by UTF-16 code unit, no whitespace, keys
 * whose value is `undefined` left out. Equal values always give equal bytes,
 * so a file's identity (its SHA-256) names its content.
 * @throws ContractError `refused` for a value JSON cannot carry exactly.
 */
export function encode(value: unknown): Uint8Array {
  return utf8Encoder.encode(canonical(value, 0));
}

/**
 * Parses untrusted bytes as one JSON value, refusing more than `maxBytes`,
 * invalid UTF-8, a byte-order mark, invalid JSON, duplicate keys at any depth,
 * and nesting deeper than 64. `label` (a file name) starts every message.
 * @throws ContractError `refused`.
 */
export function parse(bytes: Uint8Array, maxBytes: number, label = 'document'): unknown {
  if (bytes.byteLength > maxBytes) throw new ContractError('refused', `${label}: larger than ${maxBytes} bytes`);
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    throw new ContractError('refused', `${label}: starts with a byte-order mark`);
  }
  let source: string;
  try {
    source = utf8.decode(bytes);
  } catch {
    throw new ContractError('refused', `${label}: not valid UTF-8`);
  }
  return parseJsonText(source, label);
}

/** SHA-256 of the bytes, lowercase hex: the identity of a file. */
export function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

type Issue = z.core.$ZodIssue;

function valueAt(root: unknown, path: readonly PropertyKey[]): { found: boolean } {
  let current = root;
  for (const segment of path) {
    if (typeof current !== 'object' || current === null || !Object.hasOwn(current, segment)) return { found: false };
    current = (current as Record<PropertyKey, unknown>)[segment];
  }
  return { found: true };
}

// zod's own messages quote unknown keys verbatim, and its issues may carry the
// input: neither is passed on. A message says where and what kind, never what.
function describeIssue(issue: Issue, input: unknown): string {
  const where = formatPath(issue.path);
  switch (issue.code) {
    case 'unrecognized_keys':
      return `unknown key in ${where}`;
    case 'invalid_type':
      return valueAt(input, issue.path).found ? `wrong type at ${where}` : `missing key ${where}`;
    case 'too_big':
      return `too large at ${where}`;
    case 'too_small':
      return `too small at ${where}`;
    case 'invalid_value':
      return valueAt(input, issue.path).found ? `not an allowed value at ${where}` : `missing key ${where}`;
    case 'custom':
    case 'invalid_format':
      // Our own refinement messages, or zod's which name the pattern, not the input.
      return `${issue.message} at ${where}`;
    default:
      return `invalid at ${where}`;
  }
}

/** The result of `safeDecode`. */
export type DecodeResult<T> = { success: true; value: T } | { success: false; error: ContractError };

/**
 * Checks a parsed value against a schema without throwing.
 * The error names the JSON paths that failed, never a value.
 */
export function safeDecode<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  label = 'document',
): DecodeResult<z.output<Schema>> {
  const result = schema.safeParse(value);
  if (result.success) return { success: true, value: result.data };
  const issues = result.error.issues.slice(0, 3).map((issue) => describeIssue(issue, value));
  const more = result.error.issues.length > 3 ? ` (and ${result.error.issues.length - 3} more)` : '';
  return { success: false, error: new ContractError('refused', `${label}: ${issues.join('; ')}${more}`) };
}

/**
 * The typed value of `value` under `schema`.
 * @throws ContractError `refused` naming the failing JSON paths (no values).
 */
export function decode<Schema extends z.ZodType>(schema: Schema, value: unknown, label = 'document'): z.output<Schema> {
  const result = safeDecode(schema, value, label);
  if (!result.success) throw result.error;
  return result.value;
}

/**
 * `parse` then `decode`: the typed document held in `bytes`.
 * @throws ContractError `refused`.
 */
export function decodeBytes<Schema extends z.ZodType>(
  schema: Schema,
  bytes: Uint8Array,
  maxBytes: number,
  label = 'document',
): z.output<Schema> {
  return decode(schema, parse(bytes, maxBytes, label), label);
}
