import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, linkSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, contractErrorOf } from '@leasehold/test-utils';
import { makeRoot } from '../test/helpers.js';
import { PrivateFiles, UnsafeEntryError, type UnsafeEntry } from './index.js';

afterEach(cleanUp);

/** What a tool acting on the error sees: its code and the path it carries (never parsed from the message). */
function codeAndPath(action: () => unknown): { code: string; path: string | undefined; named: boolean } {
  const error = contractErrorOf(action);
  return {
    code: error.code,
    path: error.path,
    named: error.path !== undefined && error.message.startsWith(`${error.path}: `),
  };
}

function writePlain(path: string, content: string, mode = 0o600): void {
  writeFileSync(path, content, { mode });
  chmodSync(path, mode);
}

// A ContractError about a file or folder carries it as `path` (packages/contracts/README.md,
// "Errors"), so that `leasehold doctor` and other tools never parse a message.
describe('refused and conflict errors carry the path they are about', () => {
  it('refused: an open mode, a symbolic link, a second link, a FIFO, a stray name, an oversized file', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const open = join(root, 'open.json');
    writePlain(open, '{}', 0o644);
    expect(codeAndPath(() => files.read(open))).toEqual({ code: 'refused', path: open, named: true });

    const target = join(root, 'target.json');
    writePlain(target, '{}');
    const link = join(root, 'link.json');
    symlinkSync(target, link);
    expect(codeAndPath(() => files.read(link))).toEqual({ code: 'refused', path: link, named: true });

    const linked = join(root, 'linked.json');
    linkSync(target, linked);
    expect(codeAndPath(() => files.read(linked))).toEqual({ code: 'refused', path: linked, named: true });

    const fifo = join(root, 'fifo');
    execFileSync('mkfifo', ['-m', '600', fifo]);
    expect(codeAndPath(() => files.read(fifo))).toEqual({ code: 'refused', path: fifo, named: true });

    const folder = join(root, 'folder');
    mkdirSync(folder, { mode: 0o700 });
    writePlain(join(folder, 'stray'), 'x');
    expect(codeAndPath(() => files.entries(folder, ['allowed']))).toEqual({
      code: 'refused',
      path: folder,
      named: true,
    });

    const large = join(folder, 'large');
    writePlain(large, 'x'.repeat(64));
    expect(codeAndPath(() => files.read(large, 16))).toEqual({ code: 'refused', path: large, named: true });
  });

  it('refused for an unsafe entry carries the rule broken, with the facts a remedy needs', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const breachOf = (action: () => unknown): UnsafeEntry | undefined =>
      UnsafeEntryError.breachOf(contractErrorOf(action));
    const open = join(root, 'open.json');
    writePlain(open, '{}', 0o640);
    expect(breachOf(() => files.read(open))).toEqual({ rule: 'open-mode', path: open, mode: 0o640, folder: false });

    const target = join(root, 'target.json');
    writePlain(target, '{}');
    const link = join(root, 'link.json');
    symlinkSync(target, link);
    expect(breachOf(() => files.read(link))).toEqual({ rule: 'symbolic-link', path: link, expected: 'file' });
    linkSync(target, join(root, 'linked.json'));
    expect(breachOf(() => files.read(target))).toEqual({ rule: 'second-link', path: target });

    const fifo = join(root, 'fifo');
    execFileSync('mkfifo', ['-m', '600', fifo]);
    expect(breachOf(() => files.read(fifo))).toEqual({ rule: 'special-file', path: fifo, expected: 'file' });
    expect(breachOf(() => files.read(join(fifo, 'below')))).toEqual({
      rule: 'special-file',
      path: fifo,
      expected: 'folder',
    });

    const folder = join(root, 'folder');
    mkdirSync(folder, { mode: 0o700 });
    expect(breachOf(() => files.read(folder))).toEqual({ rule: 'wrong-type', path: folder, expected: 'file' });
    writePlain(join(folder, 'stray'), 'x'.repeat(64));
    expect(breachOf(() => files.entries(folder, ['allowed']))).toEqual({ rule: 'unexpected-entry', path: folder });
    expect(breachOf(() => files.read(join(folder, 'stray'), 16))).toEqual({
      rule: 'too-large',
      path: join(folder, 'stray'),
      maxBytes: 16,
    });
    chmodSync(folder, 0o750);
    expect(breachOf(() => files.read(join(folder, 'stray')))).toEqual({
      rule: 'open-mode',
      path: folder,
      mode: 0o750,
      folder: true,
    });

    expect(UnsafeEntryError.breachOf(contractErrorOf(() => files.read('not/absolute')))).toBeUndefined();
    expect(UnsafeEntryError.breachOf(new Error('x'))).toBeUndefined();
  });

  // Each remedy's command, pasted into a shell as printed, clears the entry (names with a space and a
  // quote, so the quoting is proved too): the read then answers, or finds nothing there.
  const repairable: ReadonlyArray<{ rule: string; make: (path: string) => void; cleared: 'read' | 'absent' }> = [
    { rule: 'open-mode (a file)', make: (path) => writePlain(path, '{}', 0o644), cleared: 'read' },
    { rule: 'symbolic-link', make: (path) => symlinkSync(join(path, '..', 'elsewhere.json'), path), cleared: 'absent' },
    { rule: 'special-file', make: (path) => execFileSync('mkfifo', ['-m', '600', path]), cleared: 'absent' },
    { rule: 'wrong-type', make: (path) => mkdirSync(path, { mode: 0o700 }), cleared: 'absent' },
    ...(process.geteuid?.() === 0
      ? [
          {
            rule: 'foreign-owner',
            make: (path: string) => (writePlain(path, '{}'), chownSync(path, 4242, 4242)),
            cleared: 'read' as const,
          },
        ]
      : []),
  ];
  it.each(repairable)(
    'refused for $rule carries a remedy whose command, run as printed, clears it',
    ({ make, cleared }) => {
      const root = makeRoot();
      const files = new PrivateFiles(root);
      const path = join(root, "it's here.json");
      make(path);
      const { remedy } = contractErrorOf(() => files.read(path));
      const command = /`([^`]+)`/.exec(remedy ?? '')?.[1];
      expect(command).toContain(`'${root}/it'\\''s here.json'`);
      execFileSync('/bin/sh', ['-c', command!]);
      if (cleared === 'read') expect(files.read(path)?.bytes).toEqual(new TextEncoder().encode('{}'));
      else expect(files.read(path)).toBeUndefined();
    },
  );

  it('refused for an open folder names chmod 700 of that folder, and its command clears it', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const folder = join(root, 'shared');
    mkdirSync(folder, { mode: 0o700 });
    writePlain(join(folder, 'file.json'), '{}');
    chmodSync(folder, 0o750);
    const { remedy } = contractErrorOf(() => files.read(join(folder, 'file.json')));
    expect(remedy).toBe(`take the group and other bits away: \`chmod 700 ${folder}\``);
    execFileSync('/bin/sh', ['-c', /`([^`]+)`/.exec(remedy!)![1]!]);
    expect(files.read(join(folder, 'file.json'))).toBeDefined();
  });

  it('refused for a second link, a stray name or an oversized file says what to do, in words', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const target = join(root, 'target.json');
    writePlain(target, 'x'.repeat(64));
    linkSync(target, join(root, 'linked.json'));
    expect(contractErrorOf(() => files.read(target)).remedy).toMatch(/^remove the other name this file has/);
    expect(contractErrorOf(() => files.entries(root, ['target.json'])).remedy).toBe(
      `move out of it every name that the program using it did not write (\`ls -A ${root}\` lists them)`,
    );
    const large = join(root, 'large.json');
    writePlain(large, 'x'.repeat(64));
    expect(contractErrorOf(() => files.read(large, 16)).remedy).toBe(
      'it is not a file the program using it wrote: repair or restore it by hand',
    );
  });

  it('refused: a level above the file that is unsafe names that level, not the file', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const folder = join(root, 'shared');
    mkdirSync(folder, { mode: 0o700 });
    writePlain(join(folder, 'file.json'), '{}');
    chmodSync(folder, 0o755);
    expect(codeAndPath(() => files.read(join(folder, 'file.json')))).toEqual({
      code: 'refused',
      path: folder,
      named: true,
    });
  });

  it('conflict: a file that already exists, and one that changed since it was read', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'file.json');
    const first = files.create(path, new TextEncoder().encode('{"n":1}'));
    expect(codeAndPath(() => files.create(path, new TextEncoder().encode('{"n":2}')))).toEqual({
      code: 'conflict',
      path,
      named: true,
    });
    files.replace(path, first, new TextEncoder().encode('{"n":3}'));
    expect(codeAndPath(() => files.remove(path, first))).toEqual({ code: 'conflict', path, named: true });
  });

  it('carries no path for an input that is not a path, and keeps the message as it was', () => {
    expect(codeAndPath(() => new PrivateFiles('relative/root'))).toEqual({
      code: 'refused',
      path: undefined,
      named: false,
    });
    expect(contractErrorOf(() => new PrivateFiles('relative/root')).message).toBe(
      'root: not an absolute, normalised path',
    );
    const files = new PrivateFiles(makeRoot());
    expect(codeAndPath(() => files.read('not/absolute'))).toEqual({ code: 'refused', path: undefined, named: false });
    expect(contractErrorOf(() => files.read('not/absolute')).message).toBe('path: not an absolute, normalised path');
  });
});
