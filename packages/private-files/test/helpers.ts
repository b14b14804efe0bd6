import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { codeOf, isMissing, makeTemporaryFolder, spawnPlanned, treeOf, type SpawnedChild } from '@leasehold/test-utils';
import { expect } from 'vitest';
import type { MutationStep } from '../src/index.js';

/** The folder of the child-process scripts; they import the built package by its name. */
export const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

/** A fresh private root (0700, owned by us, resolved: no symbolic link above it), removed by `cleanUp`. */
export function makeRoot(): string {
  return makeTemporaryFolder('pf-');
}

/** The ContractError code `action` throws, after asserting that it changed nothing below `root` (staging folder included). */
export function unchangedCodeOf(root: string, action: () => unknown): string {
  const before = treeOf(root);
  const code = codeOf(action);
  expect(treeOf(root)).toEqual(before);
  return code;
}

/** Sorted names in a folder, or undefined when it does not exist. */
export function namesIn(folder: string): string[] | undefined {
  try {
    return readdirSync(folder).sort();
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

/** A mutation step as the hook reports it, reduced to plain data. */
export function plainStep(step: MutationStep): MutationStep {
  return { operation: step.operation, action: step.action, path: step.path };
}

/** A plan for `fixtures/writer.mjs`: operations run in order through one PrivateFiles. */
export type WriterOperation =
  | { readonly op: 'create'; readonly path: string; readonly text: string }
  | { readonly op: 'replace'; readonly path: string; readonly text: string }
  | { readonly op: 'directory'; readonly path: string }
  | { readonly op: 'createFolder'; readonly path: string; readonly files: Readonly<Record<string, string>> };

/** Where the writer stops: the n-th hook call, or the first call with this action (and operation). */
type WriterStop =
  | { readonly how: 'kill' | 'pause'; readonly at: number }
  | { readonly how: 'kill' | 'pause'; readonly action: string; readonly operation?: string };

export interface WriterPlan {
  readonly root: string;
  readonly operations: readonly WriterOperation[];
  readonly stop?: WriterStop;
}

/** Runs `fixtures/writer.mjs` with a plan; it prints `step`, `paused` and `done` lines as JSON. */
export function spawnWriter(plan: WriterPlan): SpawnedChild {
  return spawnPlanned(FIXTURES, 'writer.mjs', plan);
}

/** The parsed JSON stdout lines of a writer that have a given key. */
export function writerMessages(child: SpawnedChild, key: string): unknown[] {
  return child.lines
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((message) => key in message)
    .map((message) => message[key]);
}
