import { AsyncLocalStorage } from 'node:async_hooks';
import type { BigIntStats } from 'node:fs';

/** What one operation's walks did, for a caller that proves a walk is made once per operation. */
export interface FileOperation {
  /** How many folder levels the walks of this operation checked in full (each level once while its proof holds). */
  readonly foldersWalked: number;
}

/** A folder a walk of this operation proved, by identity, and the last call that checked it is still that folder. */
interface Proof {
  readonly dev: bigint;
  readonly ino: bigint;
  checkedIn: number;
}

/**
 * One operation: the folders its walks proved, kept by identity until it
 * ends, and which public call of PrivateFiles is running now (a call checks
 * each proved folder it touches once, by one lstat). Proofs are kept by the
 * root walked from: a walk from another root proves its own levels.
 */
export class OperationScope implements FileOperation {
  foldersWalked = 0;
  #open = true;
  #calls = 0;
  #call = 0;
  readonly #proofs = new Map<string, Map<string, Proof>>();

  get open(): boolean {
    return this.#open;
  }

  /** The call now running; each public call of PrivateFiles is one. */
  get call(): number {
    return this.#call;
  }

  /** Runs one public call inside this operation. */
  enter<T>(call: () => T): T {
    const outer = this.#call;
    this.#calls += 1;
    this.#call = this.#calls;
    try {
      return call();
    } finally {
      this.#call = outer;
    }
  }

  /** The proof of `folder` made by a walk from `root`, if any. */
  proofOf(root: string, folder: string): Proof | undefined {
    return this.#proofs.get(root)?.get(folder);
  }

  /** Keeps `folder`'s identity, checked in full just now by a walk from `root`, until the operation ends. */
  prove(root: string, folder: string, stats: BigIntStats): void {
    const proofs = this.#proofs.get(root) ?? new Map<string, Proof>();
    proofs.set(folder, { dev: stats.dev, ino: stats.ino, checkedIn: this.#call });
    this.#proofs.set(root, proofs);
  }

  /** Drops every proof of `folder` and of every folder below it, from any root: they are walked again. */
  forget(folder: string): void {
    const below = folder === '/' ? '/' : `${folder}/`;
    for (const proofs of this.#proofs.values()) {
      for (const path of proofs.keys()) if (path === folder || path.startsWith(below)) proofs.delete(path);
    }
  }

  /** Ends the operation: nothing it proved is kept. */
  close(): void {
    this.#open = false;
    this.#proofs.clear();
  }
}

const operations = new AsyncLocalStorage<OperationScope>();
// The operation of a PrivateFiles call made alone: synchronous, so nothing else runs while it is set.
let alone: OperationScope | undefined;

/** The operation now running, if any (a closed one, reached by a timer it left, is none). */
export function activeOperation(): OperationScope | undefined {
  if (alone !== undefined) return alone;
  const scope = operations.getStore();
  return scope?.open === true ? scope : undefined;
}

/** Runs one public call of PrivateFiles: in the operation now running, or as an operation of its own. */
export function inOperation<T>(call: () => T): T {
  const outer = activeOperation();
  if (outer !== undefined) return outer.enter(call);
  const scope = new OperationScope();
  alone = scope;
  try {
    return scope.enter(call);
  } finally {
    alone = undefined;
    scope.close();
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/**
 * Runs `run` as one operation: every folder a PrivateFiles call in it walks
 * is proved once and kept, by identity, until `run` returns (or the promise
 * it returns settles); each later file access checks the file itself and that
 * its folder is still the one proved. Nested, it joins the operation already
 * running. Nothing proved outlives the operation.
 * @throws whatever `run` throws.
 */
export function fileOperation<T>(run: (operation: FileOperation) => T): T {
  const outer = activeOperation();
  if (outer !== undefined) return run(outer);
  const scope = new OperationScope();
  let result: T;
  try {
    result = operations.run(scope, () => run(scope));
  } catch (error) {
    scope.close();
    throw error;
  }
  if (!isThenable(result)) {
    scope.close();
    return result;
  }
  return Promise.resolve(result).finally(() => scope.close()) as T;
}
