import { readFileSync, writeFileSync } from 'node:fs';
import { encode } from '@leasehold/contracts';
import { replaceFile } from './files-by-hand.js';

type JsonObject = Record<string, unknown>;

/**
 * Rewrites the JSON document at `path` by hand, as canonical JSON (contracts' `encode`): `change`
 * edits the parsed value in place or returns a new one. Without `scratch`, the file itself is
 * rewritten (its inode and mode kept); with it, a new 0600 file made in `scratch` is renamed over
 * it (`replaceFile`). Code under test can tell the two apart, so each test picks the one it means.
 */
export function rewriteJson(
  path: string,
  change: (value: JsonObject) => JsonObject | void,
  options: { scratch?: string } = {},
): void {
  const value = JSON.parse(readFileSync(path, 'utf8')) as JsonObject;
  const bytes = encode(change(value) ?? value);
  if (options.scratch === undefined) writeFileSync(path, bytes);
  else replaceFile(options.scratch, path, bytes);
}
