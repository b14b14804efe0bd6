import { chmodSync, mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bytesOf, cleanUp, codeOf } from '@leasehold/test-utils';
import { makeRoot } from '../test/helpers.js';
import { ContractError, PrivateFiles, UnsafeEntryError, fileOperation, type FileOperation } from './index.js';

afterEach(cleanUp);

/** A root holding `a/b/one.json` and `a/b/two.json`, written through PrivateFiles. */
function twoFiles(): { root: string; files: PrivateFiles; folder: string; one: string; two: string } {
  const root = makeRoot();
  const files = new PrivateFiles(root);
  const folder = join(root, 'a', 'b');
  files.directory(folder, true);
  const one = join(folder, 'one.json');
  const two = join(folder, 'two.json');
  files.create(one, bytesOf('{"n":1}'));
  files.create(two, bytesOf('{"n":2}'));
  return { root, files, folder, one, two };
}

/** Moves `folder` away and puts a private folder holding the same names in its place. */
function swapForAnotherFolder(folder: string, names: readonly string[]): void {
  renameSync(folder, `${folder}.away`);
  mkdirSync(folder, { mode: 0o700 });
  for (const name of names) writeFileSync(join(folder, name), '{"n":0}', { mode: 0o600 });
}

/** Moves `folder` away and puts a symbolic link to it in its place. */
function swapForLink(folder: string): void {
  renameSync(folder, `${folder}.away`);
  symlinkSync(`${folder}.away`, folder);
}

function ruleOf(action: () => unknown): string | undefined {
  try {
    action();
  } catch (error) {
    return UnsafeEntryError.breachOf(error)?.rule;
  }
  return undefined;
}

describe('fileOperation: one walk per operation', () => {
  it('walks each folder from the root down once, however many files the operation reads', () => {
    const { files, one, two } = twoFiles();
    const walked = fileOperation((operation) => {
      for (let round = 0; round < 10; round += 1) {
        expect(files.read(one)?.identity).toBeDefined();
        expect(files.read(two)?.identity).toBeDefined();
      }
      files.entries(join(files.root, 'a', 'b'), ['one.json', 'two.json']);
      return operation.foldersWalked;
    });
    // The root, a and a/b: three levels, each proved once.
    expect(walked).toBe(3);
  });

  it('shares the proof between PrivateFiles of one root, and nested operations join the outer one', () => {
    const { root, one } = twoFiles();
    const first = new PrivateFiles(root);
    const second = new PrivateFiles(root);
    fileOperation((outer) => {
      first.read(one);
      const inner = fileOperation((nested) => {
        second.read(one);
        return nested;
      });
      expect(inner).toBe(outer);
      expect(outer.foldersWalked).toBe(3);
    });
  });

  it('keeps proofs by the root walked from: a PrivateFiles of an outer root checks its own levels', () => {
    const { root, one } = twoFiles();
    const inner = new PrivateFiles(join(root, 'a'));
    const outer = new PrivateFiles(root);
    fileOperation((operation) => {
      inner.read(one);
      expect(operation.foldersWalked).toBe(2);
      chmodSync(root, 0o750);
      expect(ruleOf(() => outer.read(one))).toBe('open-mode');
    });
  });

  it('walks again in the next operation: nothing proved is kept', () => {
    const { files, one } = twoFiles();
    const counts = [1, 2].map(() =>
      fileOperation((operation) => {
        files.read(one);
        return operation.foldersWalked;
      }),
    );
    expect(counts).toEqual([3, 3]);
  });

  it('ends with the promise of an async operation; a timer it left behind walks on its own', async () => {
    const { files, folder, one } = twoFiles();
    let kept: FileOperation | undefined;
    let late: Promise<string | undefined> | undefined;
    await fileOperation(async (operation) => {
      kept = operation;
      files.read(one);
      await new Promise((resolve) => setImmediate(resolve));
      files.read(one);
      // Fires after the operation ended, in its async context: a macrotask, after every continuation below.
      late = new Promise((resolve) => setTimeout(() => resolve(ruleOf(() => files.read(one))), 0));
    });
    expect(kept?.foldersWalked).toBe(3);
    swapForLink(folder);
    expect(await late).toBe('symbolic-link');
    expect(kept?.foldersWalked).toBe(3);
  });
});

describe('fileOperation: a folder swapped', () => {
  it('between two operations: a link in its place is refused by the next one', () => {
    const { files, folder, one } = twoFiles();
    fileOperation(() => files.read(one));
    swapForLink(folder);
    expect(ruleOf(() => fileOperation(() => files.read(one)))).toBe('symbolic-link');
    expect(ruleOf(() => files.read(one))).toBe('symbolic-link');
  });

  it('between two operations: a folder open to others in its place is refused by the next one', () => {
    const { files, folder, one } = twoFiles();
    fileOperation(() => files.read(one));
    swapForAnotherFolder(folder, ['one.json']);
    chmodSync(folder, 0o755);
    expect(ruleOf(() => fileOperation(() => files.read(one)))).toBe('open-mode');
  });

  it('between two operations: a root whose mode changed is refused by the next one', () => {
    const { root, files, one } = twoFiles();
    fileOperation(() => files.read(one));
    chmodSync(root, 0o750);
    expect(ruleOf(() => fileOperation(() => files.read(one)))).toBe('open-mode');
  });

  it('inside an operation: another folder in its place is caught at the next file access (conflict), then walked anew', () => {
    const { files, folder, one, two } = twoFiles();
    fileOperation((operation) => {
      expect(files.read(one)?.bytes).toEqual(bytesOf('{"n":1}'));
      swapForAnotherFolder(folder, ['one.json', 'two.json']);
      const error = (() => {
        try {
          files.read(two);
        } catch (caught) {
          return caught;
        }
        return undefined;
      })();
      expect(ContractError.is(error, 'conflict')).toBe(true);
      expect((error as ContractError).path).toBe(folder);
      // A retry proves the new folder in full before reading from it.
      expect(files.read(two)?.bytes).toEqual(bytesOf('{"n":0}'));
      expect(operation.foldersWalked).toBe(4);
    });
  });

  it('inside an operation: a link in its place is refused at the next file access', () => {
    const { files, folder, one, two } = twoFiles();
    fileOperation(() => {
      files.read(one);
      swapForLink(folder);
      expect(ruleOf(() => files.read(two))).toBe('symbolic-link');
      expect(codeOf(() => files.create(join(folder, 'three.json'), bytesOf('{}')))).toBe('refused');
    });
  });

  it('inside an operation: a proved folder whose mode changed is refused at the next file access', () => {
    const { files, folder, one, two } = twoFiles();
    fileOperation(() => {
      files.read(one);
      chmodSync(folder, 0o755);
      expect(ruleOf(() => files.read(two))).toBe('open-mode');
    });
  });

  it('inside an operation: a folder removed reads as absent, as outside one', () => {
    const { files, folder, one, two } = twoFiles();
    fileOperation(() => {
      files.read(one);
      renameSync(folder, `${folder}.away`);
      expect(files.read(two)).toBeUndefined();
      expect(files.directory(folder)).toBe(false);
    });
  });
});
