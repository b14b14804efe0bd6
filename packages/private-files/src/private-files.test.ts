import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bytesOf, cleanUp, codeOf, modeOf, sha256Hex, treeOf } from '@leasehold/test-utils';
import { makeRoot, namesIn, plainStep, unchangedCodeOf } from '../test/helpers.js';
import {
  PrivateFiles,
  STAGING_FOLDER,
  currentProcess,
  sameSnapshot,
  type FileSnapshot,
  type MutationStep,
  type PrivateFilesHooks,
} from './index.js';
import { stagingName } from './staging-name.js';

afterEach(cleanUp);

const DEFAULT_MAX_BYTES = 8192;
const OTHER_UID = 65534;

/** A PrivateFiles whose hook records every step it is told about. */
function recording(root: string): { files: PrivateFiles; steps: MutationStep[] } {
  const steps: MutationStep[] = [];
  const hooks: PrivateFilesHooks = { beforeMutation: (step) => steps.push(plainStep(step)) };
  return { files: new PrivateFiles(root, { hooks }), steps };
}

/** A recorded PrivateFiles with one document, `docs/file` holding 'x', made before the recording starts. */
function recordedDocument(): {
  root: string;
  files: PrivateFiles;
  steps: MutationStep[];
  path: string;
  created: FileSnapshot;
} {
  const root = makeRoot();
  const { files, steps } = recording(root);
  files.directory(join(root, 'docs'), true);
  const path = join(root, 'docs', 'file');
  const created = files.create(path, bytesOf('x'));
  steps.length = 0;
  return { root, files, steps, path, created };
}

/** A file written directly (not through PrivateFiles) with an exact mode. */
function writePlainFile(path: string, content: string | Uint8Array, mode = 0o600): void {
  writeFileSync(path, content, { mode });
  chmodSync(path, mode);
}

/** A private folder made directly, with an exact mode. */
function makePlainFolder(path: string, mode = 0o700): void {
  mkdirSync(path, { mode });
  chmodSync(path, mode);
}

/** The snapshot `read` gives, which must exist. */
function readPresent(files: PrivateFiles, path: string, maxBytes?: number): FileSnapshot {
  const snapshot = files.read(path, maxBytes);
  if (snapshot === undefined) throw new Error(`${path} is absent`);
  return snapshot;
}

describe('directory', () => {
  it('answers true for the root and for an existing private folder', () => {
    const root = makeRoot();
    makePlainFolder(join(root, 'a'));
    const files = new PrivateFiles(root);
    expect(files.directory(root)).toBe(true);
    expect(files.directory(join(root, 'a'))).toBe(true);
  });

  it('answers false for a missing folder, at one or two missing levels, and creates nothing', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const before = treeOf(root);
    expect(files.directory(join(root, 'a'))).toBe(false);
    expect(files.directory(join(root, 'a', 'b'))).toBe(false);
    expect(treeOf(root)).toEqual(before);
  });

  it('creates every missing level 0700 with create, answers true, and true again when it exists', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const deepest = join(root, 'a', 'b', 'c');
    expect(files.directory(deepest, true)).toBe(true);
    for (const folder of [join(root, 'a'), join(root, 'a', 'b'), deepest]) {
      expect(lstatSync(folder).isDirectory()).toBe(true);
      expect(modeOf(folder)).toBe(0o700);
    }
    const after = treeOf(root);
    expect(files.directory(deepest, true)).toBe(true);
    expect(files.directory(deepest)).toBe(true);
    expect(treeOf(root)).toEqual(after);
  });
});

describe('read', () => {
  it('answers undefined for an absent file, and when one or two folder levels are missing', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    expect(files.read(join(root, 'absent.json'))).toBeUndefined();
    expect(files.read(join(root, 'missing', 'absent.json'))).toBeUndefined();
    expect(files.read(join(root, 'missing', 'deeper', 'absent.json'))).toBeUndefined();
    expect(readdirSync(root)).toEqual([]);
  });

  it('returns the bytes, their SHA-256 and the stamp of a file written by another process', () => {
    const root = makeRoot();
    const path = join(root, 'plain.json');
    writePlainFile(path, '{"written":"directly"}');
    const snapshot = readPresent(new PrivateFiles(root), path);
    expect(Buffer.from(snapshot.bytes).toString()).toBe('{"written":"directly"}');
    expect(snapshot.identity).toBe(sha256Hex(bytesOf('{"written":"directly"}')));
    const stats = lstatSync(path, { bigint: true });
    expect(snapshot.stamp).toBe(`${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}`);
  });

  it('reads a file of exactly maxBytes, by default 8192 and with an explicit bound', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const full = join(root, 'full');
    writePlainFile(full, Buffer.alloc(DEFAULT_MAX_BYTES, 'x'));
    expect(readPresent(files, full).bytes.byteLength).toBe(DEFAULT_MAX_BYTES);
    const small = join(root, 'small');
    writePlainFile(small, '0123456789');
    expect(readPresent(files, small, 10).bytes.byteLength).toBe(10);
  });

  it('reads an empty file', () => {
    const root = makeRoot();
    const path = join(root, 'empty');
    writePlainFile(path, '');
    const snapshot = readPresent(new PrivateFiles(root), path);
    expect(snapshot.bytes.byteLength).toBe(0);
    expect(snapshot.identity).toBe(sha256Hex(new Uint8Array()));
  });
});

describe('create', () => {
  it('publishes a 0600 file with the bytes, whose identity is their SHA-256, and leaves no temp', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'document.json');
    const bytes = bytesOf('{"hello":"world"}');
    const created = files.create(path, bytes);
    expect(readFileSync(path)).toEqual(Buffer.from(bytes));
    expect(created.identity).toBe(sha256Hex(bytes));
    expect(Buffer.from(created.bytes)).toEqual(Buffer.from(bytes));
    const stats = lstatSync(path);
    expect(stats.isFile()).toBe(true);
    expect(stats.mode & 0o7777).toBe(0o600);
    expect(stats.nlink).toBe(1);
    expect(stats.uid).toBe(process.geteuid?.());
    expect(modeOf(join(root, STAGING_FOLDER))).toBe(0o700);
    expect(namesIn(join(root, STAGING_FOLDER))).toEqual([]);
    expect(readdirSync(root).sort()).toEqual([STAGING_FOLDER, 'document.json']);
  });

  it('returns the snapshot that a later read gives (same identity and stamp)', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'document.json');
    const created = files.create(path, bytesOf('one'));
    const read = readPresent(new PrivateFiles(root), path);
    expect(read.identity).toBe(created.identity);
    expect(read.stamp).toBe(created.stamp);
    expect(sameSnapshot(created, read)).toBe(true);
  });

  it('creates in a subfolder made by directory(create), an empty file, and a file of exactly maxBytes', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const folder = join(root, 'a', 'b');
    expect(files.directory(folder, true)).toBe(true);
    const empty = files.create(join(folder, 'empty'), new Uint8Array());
    expect(empty.identity).toBe(sha256Hex(new Uint8Array()));
    const full = files.create(join(folder, 'full'), new Uint8Array(DEFAULT_MAX_BYTES));
    expect(readPresent(files, join(folder, 'full')).identity).toBe(full.identity);
    const bounded = files.create(join(folder, 'bounded'), bytesOf('0123456789'), 10);
    expect(readPresent(files, join(folder, 'bounded'), 10).identity).toBe(bounded.identity);
    expect(readdirSync(folder).sort()).toEqual(['bounded', 'empty', 'full']);
    expect(modeOf(join(folder, 'empty'))).toBe(0o600);
  });
});

describe('replace', () => {
  it('replaces the file when the snapshot is current, returning the snapshot a read gives', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'document.json');
    const created = files.create(path, bytesOf('old'));
    const replaced = files.replace(path, created, bytesOf('new'));
    expect(readFileSync(path, 'utf8')).toBe('new');
    expect(replaced.identity).toBe(sha256Hex(bytesOf('new')));
    expect(sameSnapshot(replaced, readPresent(files, path))).toBe(true);
    expect(modeOf(path)).toBe(0o600);
    expect(lstatSync(path).nlink).toBe(1);
    expect(namesIn(join(root, STAGING_FOLDER))).toEqual([]);
    // The returned snapshot is current: a second replace through it succeeds.
    files.replace(path, replaced, bytesOf('newer'));
    expect(readFileSync(path, 'utf8')).toBe('newer');
  });
});

describe('remove', () => {
  it('removes the file when the snapshot is current', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'document.json');
    const created = files.create(path, bytesOf('doomed'));
    files.remove(path, created);
    expect(existsSync(path)).toBe(false);
    expect(files.read(path)).toBeUndefined();
    expect(readdirSync(root)).toEqual([STAGING_FOLDER]);
  });
});

describe('assert', () => {
  it('passes for the current snapshot, and for undefined when the file or its folder is absent', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'document.json');
    expect(codeOf(() => files.assert(path, undefined))).toBe('no error');
    expect(codeOf(() => files.assert(join(root, 'missing', 'document.json'), undefined))).toBe('no error');
    const created = files.create(path, bytesOf('here'));
    expect(codeOf(() => files.assert(path, created))).toBe('no error');
    expect(codeOf(() => files.assert(path, readPresent(files, path)))).toBe('no error');
  });
});

describe('unchanged', () => {
  it('is true for the incarnation read and for absence, false once replaced (even by the same bytes), removed, changed in place or made', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'document.json');
    expect(files.unchanged(path, undefined)).toBe(true);
    expect(files.unchanged(join(root, 'missing', 'document.json'), undefined)).toBe(true);
    const created = files.create(path, bytesOf('here'));
    expect(files.unchanged(path, undefined)).toBe(false);
    expect(files.unchanged(path, created)).toBe(true);
    expect(files.unchanged(path, readPresent(files, path))).toBe(true);
    const replaced = files.replace(path, created, bytesOf('here'));
    expect(files.unchanged(path, created)).toBe(false);
    expect(files.unchanged(path, replaced)).toBe(true);
    // In place, to another size (times alone may not move within one clock tick).
    writeFileSync(path, 'changed in place');
    expect(files.unchanged(path, replaced)).toBe(false);
    const rewritten = readPresent(files, path);
    files.remove(path, rewritten);
    expect(files.unchanged(path, rewritten)).toBe(false);
    writeFileSync(join(root, 'file'), 'x', { mode: 0o600 });
    expect(files.unchanged(join(root, 'file', 'document.json'), undefined)).toBe(false);
    expect(codeOf(() => files.unchanged('/elsewhere/document.json', undefined))).toBe('refused');
  });
});

describe('entries', () => {
  it('lists the names of a folder, sorted, never the staging folder of the root', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    files.create(join(root, 'b.json'), bytesOf('b'));
    files.create(join(root, 'a.json'), bytesOf('a'));
    files.directory(join(root, 'sub'), true);
    expect(existsSync(join(root, STAGING_FOLDER))).toBe(true);
    expect(files.entries(root, ['a.json', 'b.json', 'sub'])).toEqual(['a.json', 'b.json', 'sub']);
    expect(files.entries(join(root, 'sub'), [])).toEqual([]);
  });

  it('answers an empty list for a missing folder', () => {
    const root = makeRoot();
    expect(new PrivateFiles(root).entries(join(root, 'missing'), [])).toEqual([]);
  });

  it('refuses a folder holding a name that is not allowed, changing nothing', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    files.create(join(root, 'a.json'), bytesOf('a'));
    writePlainFile(join(root, 'stray'), 'x');
    expect(unchangedCodeOf(root, () => files.entries(root, ['a.json']))).toBe('refused');
  });

  it('lists a name ".staging" below the root like any other name', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    files.directory(join(root, 'sub', STAGING_FOLDER), true);
    expect(codeOf(() => files.entries(join(root, 'sub'), []))).toBe('refused');
    expect(files.entries(join(root, 'sub'), [STAGING_FOLDER])).toEqual([STAGING_FOLDER]);
  });
});

describe('sameSnapshot', () => {
  it('is true only for equal identity and stamp, and for two undefined', () => {
    const snapshot: FileSnapshot = { bytes: new Uint8Array(), identity: 'a', stamp: '1' };
    expect(sameSnapshot(snapshot, { ...snapshot })).toBe(true);
    expect(sameSnapshot(snapshot, { ...snapshot, stamp: '2' })).toBe(false);
    expect(sameSnapshot(snapshot, { ...snapshot, identity: 'b' })).toBe(false);
    expect(sameSnapshot(snapshot, undefined)).toBe(false);
    expect(sameSnapshot(undefined, snapshot)).toBe(false);
    expect(sameSnapshot(undefined, undefined)).toBe(true);
  });
});

describe('conflict', () => {
  it('create is conflict when a file, a folder, a symbolic link (dangling or not) or a FIFO is at the path', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    files.create(join(root, 'file'), bytesOf('first'));
    makePlainFolder(join(root, 'folder'));
    symlinkSync(join(root, 'file'), join(root, 'link'));
    symlinkSync(join(root, 'nowhere'), join(root, 'dangling'));
    execFileSync('mkfifo', ['-m', '600', join(root, 'fifo')]);
    for (const name of ['file', 'folder', 'link', 'dangling', 'fifo']) {
      expect(unchangedCodeOf(root, () => files.create(join(root, name), bytesOf('second')))).toBe('conflict');
    }
    expect(existsSync(join(root, 'nowhere'))).toBe(false);
  });

  it('create is conflict on the first create of a fresh root without making the staging folder', () => {
    const root = makeRoot();
    writePlainFile(join(root, 'file'), 'there');
    expect(unchangedCodeOf(root, () => new PrivateFiles(root).create(join(root, 'file'), bytesOf('x')))).toBe(
      'conflict',
    );
    expect(existsSync(join(root, STAGING_FOLDER))).toBe(false);
  });

  it('replace, remove and assert are conflict after the bytes changed (identity change)', () => {
    const root = makeRoot();
    const path = join(root, 'document.json');
    const files = new PrivateFiles(root);
    const old = files.create(path, bytesOf('old'));
    const other = new PrivateFiles(root);
    other.replace(path, readPresent(other, path), bytesOf('changed'));
    expect(unchangedCodeOf(root, () => files.replace(path, old, bytesOf('mine')))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.remove(path, old))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.assert(path, old))).toBe('conflict');
    expect(readFileSync(path, 'utf8')).toBe('changed');
  });

  it('replace, remove and assert are conflict after the same bytes were rewritten through replace (stamp only)', () => {
    const root = makeRoot();
    const path = join(root, 'document.json');
    const files = new PrivateFiles(root);
    const old = files.create(path, bytesOf('same'));
    const rewritten = files.replace(path, old, bytesOf('same'));
    expect(rewritten.identity).toBe(old.identity);
    expect(rewritten.stamp).not.toBe(old.stamp);
    expect(unchangedCodeOf(root, () => files.replace(path, old, bytesOf('mine')))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.remove(path, old))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.assert(path, old))).toBe('conflict');
    expect(codeOf(() => files.assert(path, rewritten))).toBe('no error');
  });

  it('replace, remove and assert are conflict after another PrivateFiles rewrote the same bytes (stamp only)', () => {
    const root = makeRoot();
    const path = join(root, 'document.json');
    const files = new PrivateFiles(root);
    const old = files.create(path, bytesOf('same'));
    const other = new PrivateFiles(root);
    other.replace(path, readPresent(other, path), bytesOf('same'));
    const current = readPresent(files, path);
    expect(current.identity).toBe(old.identity);
    expect(current.stamp).not.toBe(old.stamp);
    expect(unchangedCodeOf(root, () => files.replace(path, old, bytesOf('mine')))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.remove(path, old))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.assert(path, old))).toBe('conflict');
  });

  it('replace, remove and assert are conflict after only the mtime of the same inode changed (stamp only)', () => {
    const root = makeRoot();
    const path = join(root, 'document.json');
    const files = new PrivateFiles(root);
    const old = files.create(path, bytesOf('same'));
    const inode = lstatSync(path).ino;
    utimesSync(path, new Date('2001-02-03T04:05:06Z'), new Date('2001-02-03T04:05:06Z'));
    const current = readPresent(files, path);
    expect(lstatSync(path).ino).toBe(inode);
    expect(current.identity).toBe(old.identity);
    expect(current.stamp).not.toBe(old.stamp);
    expect(unchangedCodeOf(root, () => files.replace(path, old, bytesOf('mine')))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.remove(path, old))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.assert(path, old))).toBe('conflict');
  });

  it('replace and remove of a file that is absent are conflict', () => {
    const root = makeRoot();
    const path = join(root, 'document.json');
    const files = new PrivateFiles(root);
    const old = files.create(path, bytesOf('gone soon'));
    files.remove(path, old);
    expect(unchangedCodeOf(root, () => files.replace(path, old, bytesOf('mine')))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.remove(path, old))).toBe('conflict');
    expect(existsSync(path)).toBe(false);
  });

  it('assert is conflict for undefined when the file exists, and for a snapshot when it is absent', () => {
    const root = makeRoot();
    const path = join(root, 'document.json');
    const files = new PrivateFiles(root);
    const created = files.create(path, bytesOf('present'));
    expect(unchangedCodeOf(root, () => files.assert(path, undefined))).toBe('conflict');
    files.remove(path, created);
    expect(unchangedCodeOf(root, () => files.assert(path, created))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.assert(join(root, 'missing', 'document.json'), created))).toBe('conflict');
  });

  it('assert is conflict for a snapshot of another file with the same bytes', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const first = files.create(join(root, 'first'), bytesOf('twin'));
    files.create(join(root, 'second'), bytesOf('twin'));
    expect(unchangedCodeOf(root, () => files.assert(join(root, 'second'), first))).toBe('conflict');
  });
});

describe('conflict with a writer in between (driven from the hook)', () => {
  it('create is conflict when another writer publishes the file between its check and its link, and its temp is removed', () => {
    const root = makeRoot();
    const path = join(root, 'file');
    const other = new PrivateFiles(root);
    let published: FileSnapshot | undefined;
    const files = new PrivateFiles(root, {
      hooks: {
        beforeMutation: (step) => {
          if (step.action === 'link') published = other.create(path, bytesOf('the other writer'));
        },
      },
    });
    expect(codeOf(() => files.create(path, bytesOf('mine')))).toBe('conflict');
    expect(readFileSync(path, 'utf8')).toBe('the other writer');
    expect(codeOf(() => files.assert(path, published))).toBe('no error');
    expect(namesIn(join(root, STAGING_FOLDER))).toEqual([]);
    expect(readdirSync(root).sort()).toEqual([STAGING_FOLDER, 'file']);
  });

  for (const action of ['write', 'fsync'] as const) {
    it(`replace is conflict when another writer changes the file at its ${action} step, and its temp is removed`, () => {
      const root = makeRoot();
      const path = join(root, 'file');
      const other = new PrivateFiles(root);
      const old = other.create(path, bytesOf('old'));
      let changed: FileSnapshot | undefined;
      const files = new PrivateFiles(root, {
        hooks: {
          beforeMutation: (step) => {
            if (step.action === action) changed = other.replace(path, old, bytesOf('old'));
          },
        },
      });
      expect(codeOf(() => files.replace(path, old, bytesOf('mine')))).toBe('conflict');
      expect(codeOf(() => files.assert(path, changed))).toBe('no error');
      expect(readFileSync(path, 'utf8')).toBe('old');
      expect(namesIn(join(root, STAGING_FOLDER))).toEqual([]);
    });
  }
});

describe('refused: symbolic links', () => {
  it('refuses a symbolic link as the file for read, replace, remove and assert; create is conflict', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const real = join(root, 'real.json');
    const link = join(root, 'link.json');
    const snapshot = files.create(real, bytesOf('target'));
    symlinkSync(real, link);
    expect(unchangedCodeOf(root, () => files.read(link))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.replace(link, snapshot, bytesOf('x')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.remove(link, snapshot))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.assert(link, snapshot))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.assert(link, undefined))).toBe('refused');
    // Something exists at the path: the exclusive create answers conflict, and follows nothing.
    expect(unchangedCodeOf(root, () => files.create(link, bytesOf('x')))).toBe('conflict');
  });

  it('refuses a symbolic link to a file outside the root', () => {
    const root = makeRoot();
    const outside = makeRoot();
    writePlainFile(join(outside, 'secret'), 'outside');
    symlinkSync(join(outside, 'secret'), join(root, 'link'));
    expect(unchangedCodeOf(root, () => new PrivateFiles(root).read(join(root, 'link')))).toBe('refused');
  });

  for (const depth of ['one level', 'two levels'] as const) {
    it(`refuses a symbolic link as a folder ${depth} below the root, for every operation`, () => {
      const root = makeRoot();
      const files = new PrivateFiles(root);
      const real = join(root, 'real');
      files.directory(real, true);
      const snapshot = files.create(join(real, 'file'), bytesOf('behind a link'));
      let linked = join(root, 'link');
      if (depth === 'two levels') {
        files.directory(join(root, 'a'), true);
        linked = join(root, 'a', 'link');
      }
      symlinkSync(real, linked);
      const file = join(linked, 'file');
      expect(unchangedCodeOf(root, () => files.read(file))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.read(join(linked, 'absent')))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.create(join(linked, 'new'), bytesOf('x')))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.replace(file, snapshot, bytesOf('x')))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.remove(file, snapshot))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.assert(file, snapshot))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.directory(linked))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.directory(join(linked, 'sub'), true))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.entries(linked, ['file']))).toBe('refused');
    });
  }

  it('refuses a root that is a symbolic link to a private folder', () => {
    const parent = makeRoot();
    const real = join(parent, 'real');
    makePlainFolder(real);
    writePlainFile(join(real, 'file'), 'x');
    symlinkSync(real, join(parent, 'root'));
    const files = new PrivateFiles(join(parent, 'root'));
    expect(unchangedCodeOf(parent, () => files.read(join(parent, 'root', 'file')))).toBe('refused');
    expect(unchangedCodeOf(parent, () => files.directory(join(parent, 'root')))).toBe('refused');
  });

  it('refuses a symbolic link as the staging folder', () => {
    const root = makeRoot();
    const elsewhere = makeRoot();
    symlinkSync(elsewhere, join(root, STAGING_FOLDER));
    const files = new PrivateFiles(root);
    expect(unchangedCodeOf(root, () => files.create(join(root, 'file'), bytesOf('x')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.sweepStaging())).toBe('refused');
    expect(readdirSync(elsewhere)).toEqual([]);
  });
});

describe('refused: hard links, FIFOs and devices', () => {
  it('refuses a file with a second link in the same folder, for read, replace, remove and assert', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'file');
    const snapshot = files.create(path, bytesOf('linked'));
    linkSync(path, join(root, 'second-name'));
    expect(lstatSync(path).nlink).toBe(2);
    expect(unchangedCodeOf(root, () => files.read(path))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.read(join(root, 'second-name')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.replace(path, snapshot, bytesOf('x')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.remove(path, snapshot))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.assert(path, snapshot))).toBe('refused');
  });

  it('refuses a file whose second link is outside the root', () => {
    const root = makeRoot();
    const outside = makeRoot();
    const path = join(root, 'file');
    new PrivateFiles(root).create(path, bytesOf('linked'));
    linkSync(path, join(outside, 'other-name'));
    expect(unchangedCodeOf(root, () => new PrivateFiles(root).read(path))).toBe('refused');
  });

  it('refuses a file whose second link is in the staging folder under a name that names no writer', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'file');
    files.create(path, bytesOf('linked'));
    linkSync(path, join(root, STAGING_FOLDER, 'not-a-writer.tmp'));
    expect(unchangedCodeOf(root, () => files.read(path))).toBe('refused');
  });

  it('refuses a file whose second link is in the staging folder under the name of a writer on another host', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'file');
    files.create(path, bytesOf('linked'));
    const me = currentProcess();
    linkSync(path, join(root, STAGING_FOLDER, stagingName({ ...me, host: `${me.host}-elsewhere` })));
    expect(unchangedCodeOf(root, () => files.read(path))).toBe('refused');
  });

  it('reads a file whose second link is a staging temp of this live process as conflict (a create in flight)', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'file');
    const created = files.create(path, bytesOf('in flight'));
    linkSync(path, join(root, STAGING_FOLDER, stagingName(currentProcess())));
    expect(unchangedCodeOf(root, () => files.read(path))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.assert(path, created))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.replace(path, created, bytesOf('x')))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.remove(path, created))).toBe('conflict');
  });

  it('refuses a FIFO at once (read never opens it, so it cannot hang), and for replace, remove and assert', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'fifo');
    const snapshot = files.create(path, bytesOf('was a file'));
    files.remove(path, snapshot);
    execFileSync('mkfifo', ['-m', '600', path]);
    expect(lstatSync(path).isFIFO()).toBe(true);
    expect(unchangedCodeOf(root, () => files.read(path))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.replace(path, snapshot, bytesOf('x')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.remove(path, snapshot))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.assert(path, undefined))).toBe('refused');
  });

  it('refuses a character device', () => {
    const root = makeRoot();
    const path = join(root, 'null');
    execFileSync('mknod', ['-m', '600', path, 'c', '1', '3']);
    expect(lstatSync(path).isCharacterDevice()).toBe(true);
    expect(unchangedCodeOf(root, () => new PrivateFiles(root).read(path))).toBe('refused');
  });

  it('refuses a folder where a file is expected, and a file where a folder is expected', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    makePlainFolder(join(root, 'folder'));
    writePlainFile(join(root, 'file'), 'x');
    expect(unchangedCodeOf(root, () => files.read(join(root, 'folder')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.read(join(root, 'file', 'below')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.directory(join(root, 'file')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.directory(join(root, 'file', 'below'), true))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.create(join(root, 'file', 'below'), bytesOf('x')))).toBe('refused');
  });
});

describe('refused: modes and owners', () => {
  for (const mode of [0o644, 0o640, 0o604, 0o660, 0o620, 0o602, 0o610, 0o601]) {
    it(`refuses a file of mode ${mode.toString(8)} for read, replace and remove`, () => {
      const root = makeRoot();
      const files = new PrivateFiles(root);
      const path = join(root, 'file');
      const snapshot = files.create(path, bytesOf('private'));
      chmodSync(path, mode);
      expect(unchangedCodeOf(root, () => files.read(path))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.replace(path, snapshot, bytesOf('x')))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.remove(path, snapshot))).toBe('refused');
    });
  }

  for (const mode of [0o755, 0o750, 0o705, 0o770, 0o710, 0o701]) {
    it(`refuses a folder of mode ${mode.toString(8)} below the root`, () => {
      const root = makeRoot();
      const files = new PrivateFiles(root);
      const folder = join(root, 'folder');
      files.directory(folder, true);
      const snapshot = files.create(join(folder, 'file'), bytesOf('private'));
      chmodSync(folder, mode);
      expect(unchangedCodeOf(root, () => files.directory(folder))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.read(join(folder, 'file')))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.create(join(folder, 'new'), bytesOf('x')))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.replace(join(folder, 'file'), snapshot, bytesOf('x')))).toBe('refused');
      expect(unchangedCodeOf(root, () => files.entries(folder, ['file']))).toBe('refused');
    });
  }

  it('refuses a root of mode 755 for every operation', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const snapshot = files.create(join(root, 'file'), bytesOf('private'));
    chmodSync(root, 0o755);
    expect(unchangedCodeOf(root, () => files.directory(root))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.directory(join(root, 'sub'), true))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.read(join(root, 'file')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.create(join(root, 'new'), bytesOf('x')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.replace(join(root, 'file'), snapshot, bytesOf('x')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.remove(join(root, 'file'), snapshot))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.assert(join(root, 'file'), snapshot))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.entries(root, ['file']))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.sweepStaging())).toBe('refused');
  });

  it('refuses a staging folder of mode 755', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    files.create(join(root, 'file'), bytesOf('private'));
    chmodSync(join(root, STAGING_FOLDER), 0o755);
    expect(unchangedCodeOf(root, () => files.create(join(root, 'new'), bytesOf('x')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.sweepStaging())).toBe('refused');
  });

  it('refuses a file owned by another user for read, replace, remove and assert', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'file');
    const snapshot = files.create(path, bytesOf('private'));
    chownSync(path, OTHER_UID, OTHER_UID);
    expect(unchangedCodeOf(root, () => files.read(path))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.replace(path, snapshot, bytesOf('x')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.remove(path, snapshot))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.assert(path, snapshot))).toBe('refused');
  });

  it('refuses a folder owned by another user, and a root owned by another user', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const folder = join(root, 'folder');
    files.directory(folder, true);
    files.create(join(folder, 'file'), bytesOf('private'));
    chownSync(folder, OTHER_UID, OTHER_UID);
    expect(unchangedCodeOf(root, () => files.directory(folder))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.read(join(folder, 'file')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.create(join(folder, 'new'), bytesOf('x')))).toBe('refused');
    chownSync(folder, process.getuid?.() ?? 0, process.getgid?.() ?? 0);
    chownSync(root, OTHER_UID, OTHER_UID);
    expect(unchangedCodeOf(root, () => files.read(join(folder, 'file')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.directory(root))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.create(join(root, 'new'), bytesOf('x')))).toBe('refused');
  });
});

describe('refused: sizes', () => {
  it('refuses to read a file of maxBytes + 1, with the default and with an explicit bound', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const big = join(root, 'big');
    writePlainFile(big, Buffer.alloc(DEFAULT_MAX_BYTES + 1, 'x'));
    expect(unchangedCodeOf(root, () => files.read(big))).toBe('refused');
    const small = join(root, 'small');
    writePlainFile(small, '0123456789');
    expect(unchangedCodeOf(root, () => files.read(small, 9))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.assert(small, undefined, 9))).toBe('refused');
  });

  it('refuses to create more than maxBytes before writing anything, not even the staging folder', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    expect(unchangedCodeOf(root, () => files.create(join(root, 'big'), new Uint8Array(DEFAULT_MAX_BYTES + 1)))).toBe(
      'refused',
    );
    expect(unchangedCodeOf(root, () => files.create(join(root, 'small'), bytesOf('0123456789'), 9))).toBe('refused');
    expect(readdirSync(root)).toEqual([]);
  });

  it('refuses to replace with more than maxBytes, leaving the file and staging folder as they were', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'file');
    const snapshot = files.create(path, bytesOf('small'));
    expect(unchangedCodeOf(root, () => files.replace(path, snapshot, new Uint8Array(DEFAULT_MAX_BYTES + 1)))).toBe(
      'refused',
    );
    expect(unchangedCodeOf(root, () => files.replace(path, snapshot, bytesOf('0123456789'), 9))).toBe('refused');
    expect(namesIn(join(root, STAGING_FOLDER))).toEqual([]);
    expect(codeOf(() => files.assert(path, snapshot))).toBe('no error');
  });

  it('refuses to remove or replace a file over the bound it is read with', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const path = join(root, 'file');
    const snapshot = files.create(path, bytesOf('0123456789'));
    expect(unchangedCodeOf(root, () => files.remove(path, snapshot, 9))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.replace(path, snapshot, bytesOf('0'), 9))).toBe('refused');
  });
});

describe('refused: paths', () => {
  it('refuses a root that is not absolute and normalised', () => {
    for (const root of ['', 'relative', '/tmp/', '/tmp/../tmp', '/tmp//x', '/tmp/./x']) {
      expect(codeOf(() => new PrivateFiles(root))).toBe('refused');
    }
  });

  it('refuses paths outside the root, with . or .., relative, doubled or trailing slashes, for every operation', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    files.directory(join(root, 'a'), true);
    const snapshot = files.create(join(root, 'a', 'file'), bytesOf('x'));
    const outside = makeRoot();
    writePlainFile(join(outside, 'file'), 'x');
    const badPaths = [
      join(outside, 'file'),
      `${root}-sibling/file`,
      `${root}x/file`,
      '/etc/passwd',
      `${root}/../${root.split('/').pop() ?? ''}/a/file`,
      `${root}/a/../a/file`,
      `${root}/./a/file`,
      'a/file',
      './a/file',
      '',
      `${root}/a/file/`,
      `${root}/a/`,
      `${root}//a/file`,
      `${root}/a//file`,
    ];
    for (const path of badPaths) {
      const codes = [
        codeOf(() => files.read(path)),
        codeOf(() => files.create(path, bytesOf('y'))),
        codeOf(() => files.replace(path, snapshot, bytesOf('y'))),
        codeOf(() => files.remove(path, snapshot)),
        codeOf(() => files.assert(path, undefined)),
        codeOf(() => files.directory(path)),
        codeOf(() => files.directory(path, true)),
        codeOf(() => files.entries(path, [])),
      ];
      expect({ path, codes }).toEqual({ path, codes: codes.map(() => 'refused') });
    }
    expect(readFileSync(join(outside, 'file'), 'utf8')).toBe('x');
    expect(readdirSync(outside)).toEqual(['file']);
    expect(codeOf(() => files.assert(join(root, 'a', 'file'), snapshot))).toBe('no error');
  });

  it('refuses the root itself as a file path', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const snapshot = files.create(join(root, 'file'), bytesOf('x'));
    expect(unchangedCodeOf(root, () => files.read(root))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.create(root, bytesOf('y')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.replace(root, snapshot, bytesOf('y')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.remove(root, snapshot))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.assert(root, undefined))).toBe('refused');
  });

  it('refuses to create in a folder that does not exist, and makes no folder', () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    files.create(join(root, 'file'), bytesOf('x'));
    expect(unchangedCodeOf(root, () => files.create(join(root, 'missing', 'file'), bytesOf('y')))).toBe('refused');
    expect(unchangedCodeOf(root, () => files.create(join(root, 'a', 'b', 'file'), bytesOf('y')))).toBe('refused');
  });
});

describe('the beforeMutation hook', () => {
  it('sees create write, fsync, link, unlink and folder fsync, in order, on a root whose staging folder exists', () => {
    const root = makeRoot();
    makePlainFolder(join(root, STAGING_FOLDER));
    makePlainFolder(join(root, 'docs'));
    const { files, steps } = recording(root);
    const path = join(root, 'docs', 'file');
    files.create(path, bytesOf('x'));
    const temp = steps[0]?.path ?? '';
    expect(temp.startsWith(`${root}/${STAGING_FOLDER}/`)).toBe(true);
    expect(temp.endsWith('.tmp')).toBe(true);
    expect(temp.slice(`${root}/${STAGING_FOLDER}/`.length)).toMatch(new RegExp(`^${process.pid}\\.[^/]+\\.tmp$`));
    expect(steps).toEqual([
      { operation: 'create', action: 'write', path: temp },
      { operation: 'create', action: 'fsync', path: temp },
      { operation: 'create', action: 'link', path },
      { operation: 'create', action: 'unlink', path: temp },
      { operation: 'create', action: 'fsync-directory', path: join(root, 'docs') },
    ]);
  });

  it('sees the staging folder made and the root fsynced first, on the first create of a fresh root', () => {
    const root = makeRoot();
    const { files, steps } = recording(root);
    const path = join(root, 'file');
    files.create(path, bytesOf('x'));
    const temp = steps[2]?.path ?? '';
    expect(temp.startsWith(`${root}/${STAGING_FOLDER}/`)).toBe(true);
    expect(temp.endsWith('.tmp')).toBe(true);
    expect(steps).toEqual([
      { operation: 'create', action: 'mkdir', path: join(root, STAGING_FOLDER) },
      { operation: 'create', action: 'fsync-directory', path: root },
      { operation: 'create', action: 'write', path: temp },
      { operation: 'create', action: 'fsync', path: temp },
      { operation: 'create', action: 'link', path },
      { operation: 'create', action: 'unlink', path: temp },
      { operation: 'create', action: 'fsync-directory', path: root },
    ]);
  });

  it('sees replace write, fsync, rename and folder fsync, in order, with a fresh temp name', () => {
    const root = makeRoot();
    const { files, steps } = recording(root);
    files.directory(join(root, 'docs'), true);
    const path = join(root, 'docs', 'file');
    const created = files.create(path, bytesOf('old'));
    const createTemp = steps.find((step) => step.action === 'write')?.path;
    steps.length = 0;
    files.replace(path, created, bytesOf('new'));
    const temp = steps[0]?.path ?? '';
    expect(temp.startsWith(`${root}/${STAGING_FOLDER}/`)).toBe(true);
    expect(temp.endsWith('.tmp')).toBe(true);
    expect(temp).not.toBe(createTemp);
    expect(steps).toEqual([
      { operation: 'replace', action: 'write', path: temp },
      { operation: 'replace', action: 'fsync', path: temp },
      { operation: 'replace', action: 'rename', path },
      { operation: 'replace', action: 'fsync-directory', path: join(root, 'docs') },
    ]);
  });

  it('is told the source of a link or rename and the bytes of a write, in create and replace, and nothing more', () => {
    const root = makeRoot();
    const steps: MutationStep[] = [];
    const files = new PrivateFiles(root, { hooks: { beforeMutation: (step) => steps.push({ ...step }) } });
    const path = join(root, 'file');
    const created = files.create(path, bytesOf('old'));
    files.replace(path, created, bytesOf('new'));
    const [createTemp, replaceTemp] = steps.filter((step) => step.action === 'write').map((step) => step.path);
    // The recorded arrays are the ones passed in: compare their text, not their identity.
    const shown = steps.map(({ bytes, ...step }) =>
      bytes === undefined ? step : { ...step, text: new TextDecoder().decode(bytes) },
    );
    expect(shown).toEqual([
      { operation: 'create', action: 'mkdir', path: join(root, STAGING_FOLDER) },
      { operation: 'create', action: 'fsync-directory', path: root },
      { operation: 'create', action: 'write', path: createTemp, text: 'old' },
      { operation: 'create', action: 'fsync', path: createTemp },
      { operation: 'create', action: 'link', path, source: createTemp },
      { operation: 'create', action: 'unlink', path: createTemp },
      { operation: 'create', action: 'fsync-directory', path: root },
      { operation: 'replace', action: 'write', path: replaceTemp, text: 'new' },
      { operation: 'replace', action: 'fsync', path: replaceTemp },
      { operation: 'replace', action: 'rename', path, source: replaceTemp },
      { operation: 'replace', action: 'fsync-directory', path: root },
    ]);
  });

  it('sees remove unlink and folder fsync, in order', () => {
    const { root, files, steps, path, created } = recordedDocument();
    files.remove(path, created);
    expect(steps).toEqual([
      { operation: 'remove', action: 'unlink', path },
      { operation: 'remove', action: 'fsync-directory', path: join(root, 'docs') },
    ]);
  });

  it('with syncFolder: false, create skips exactly the folder fsync; the data fsync before the link stays', () => {
    const root = makeRoot();
    const { files, steps } = recording(root);
    files.directory(join(root, 'docs'), true);
    files.create(join(root, 'docs', 'warm-up'), bytesOf('w'));
    steps.length = 0;
    const path = join(root, 'docs', 'file');
    const created = files.create(path, bytesOf('x'), undefined, { syncFolder: false });
    const temp = steps[0]?.path ?? '';
    expect(temp.startsWith(`${root}/${STAGING_FOLDER}/`)).toBe(true);
    expect(steps).toEqual([
      { operation: 'create', action: 'write', path: temp },
      { operation: 'create', action: 'fsync', path: temp },
      { operation: 'create', action: 'link', path },
      { operation: 'create', action: 'unlink', path: temp },
    ]);
    // The file is published all the same, whole, single-link, its temp gone.
    expect(files.read(path)?.identity).toBe(created.identity);
    expect(lstatSync(path).nlink).toBe(1);
    expect(namesIn(join(root, STAGING_FOLDER))).toEqual([]);
    // syncFolder: true is the default.
    steps.length = 0;
    files.create(join(root, 'docs', 'other'), bytesOf('y'), undefined, { syncFolder: true });
    expect(steps.at(-1)).toEqual({ operation: 'create', action: 'fsync-directory', path: join(root, 'docs') });
  });

  it('with syncFolder: false, remove skips exactly the folder fsync after its unlink', () => {
    const { files, steps, path, created } = recordedDocument();
    files.remove(path, created, undefined, { syncFolder: false });
    expect(steps).toEqual([{ operation: 'remove', action: 'unlink', path }]);
    expect(files.read(path)).toBeUndefined();
    // The checks are unchanged: a second remove is a conflict, and nothing runs.
    steps.length = 0;
    expect(codeOf(() => files.remove(path, created, undefined, { syncFolder: false }))).toBe('conflict');
    expect(steps).toEqual([]);
  });

  it('with syncFolder: false, replace skips exactly the folder fsync after its rename; the data fsync before it stays', () => {
    const { files, steps, path, created } = recordedDocument();
    const replaced = files.replace(path, created, bytesOf('y'), undefined, { syncFolder: false });
    const temp = steps[0]?.path ?? '';
    expect(steps).toEqual([
      { operation: 'replace', action: 'write', path: temp },
      { operation: 'replace', action: 'fsync', path: temp },
      { operation: 'replace', action: 'rename', path },
    ]);
    expect(files.read(path)?.identity).toBe(replaced.identity);
    // The compare-and-swap is unchanged: the old snapshot is a conflict now, and nothing runs.
    steps.length = 0;
    expect(codeOf(() => files.replace(path, created, bytesOf('z'), undefined, { syncFolder: false }))).toBe('conflict');
    expect(steps).toEqual([]);
  });

  it('with syncFolder: false, create refuses and conflicts exactly as without it', () => {
    const { root, files, steps, path } = recordedDocument();
    expect(codeOf(() => files.create(path, bytesOf('y'), undefined, { syncFolder: false }))).toBe('conflict');
    expect(
      codeOf(() => files.create(join(root, 'missing', 'file'), bytesOf('y'), undefined, { syncFolder: false })),
    ).toBe('refused');
    expect(steps).toEqual([]);
  });

  it('sees directory(create) make each missing level and fsync its parent, in order', () => {
    const root = makeRoot();
    const { files, steps } = recording(root);
    files.directory(join(root, 'a'), true);
    steps.length = 0;
    files.directory(join(root, 'a', 'b', 'c'), true);
    expect(steps).toEqual([
      { operation: 'directory', action: 'mkdir', path: join(root, 'a', 'b') },
      { operation: 'directory', action: 'fsync-directory', path: join(root, 'a') },
      { operation: 'directory', action: 'mkdir', path: join(root, 'a', 'b', 'c') },
      { operation: 'directory', action: 'fsync-directory', path: join(root, 'a', 'b') },
    ]);
  });

  it('sees nothing for read, assert, entries, an existing directory, and refused or conflicting calls', () => {
    const root = makeRoot();
    const { files, steps } = recording(root);
    const path = join(root, 'file');
    const created = files.create(path, bytesOf('x'));
    steps.length = 0;
    files.read(path);
    files.assert(path, created);
    files.entries(root, ['file']);
    files.directory(root, true);
    files.sweepStaging();
    expect(codeOf(() => files.create(path, bytesOf('y')))).toBe('conflict');
    expect(codeOf(() => files.replace(path, { ...created, stamp: 'other' }, bytesOf('y')))).toBe('conflict');
    expect(codeOf(() => files.remove(path, { ...created, identity: 'other' }))).toBe('conflict');
    expect(codeOf(() => files.create(join(root, 'big'), new Uint8Array(DEFAULT_MAX_BYTES + 1)))).toBe('refused');
    expect(steps).toEqual([]);
  });
});

describe('temp files', () => {
  it('never appear in the target folder at any step of create and replace', () => {
    const root = makeRoot();
    const folder = join(root, 'docs');
    const target = join(folder, 'file');
    new PrivateFiles(root).directory(folder, true);
    const seen: { step: MutationStep; names: string[] }[] = [];
    const files = new PrivateFiles(root, {
      hooks: { beforeMutation: (step) => seen.push({ step: plainStep(step), names: readdirSync(folder).sort() }) },
    });
    const created = files.create(target, bytesOf('old'));
    files.replace(target, created, bytesOf('new'));
    expect(seen).toHaveLength(11);
    for (const { step, names } of seen) {
      expect({ step, names }).toEqual({ step, names: names.length === 0 ? [] : ['file'] });
    }
    expect(readdirSync(folder)).toEqual(['file']);
  });

  it('are made 0600 in the staging folder', () => {
    const root = makeRoot();
    const modes: number[] = [];
    const files = new PrivateFiles(root, {
      hooks: {
        beforeMutation: (step) => {
          if (step.action === 'fsync') modes.push(modeOf(step.path));
        },
      },
    });
    const created = files.create(join(root, 'file'), bytesOf('old'));
    files.replace(join(root, 'file'), created, bytesOf('new'));
    expect(modes).toEqual([0o600, 0o600]);
  });
});
