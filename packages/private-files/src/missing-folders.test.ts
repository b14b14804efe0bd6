import { chmodSync, chownSync, mkdirSync, readdirSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bytesOf, cleanUp, codeOf, contractErrorOf, modeOf, treeOf } from '@leasehold/test-utils';
import { makeRoot, plainStep } from '../test/helpers.js';
import {
  PrivateFiles,
  STAGING_FOLDER,
  UnsafeEntryError,
  type FileSnapshot,
  type MutationAction,
  type MutationStep,
} from './index.js';

afterEach(cleanUp);

/** A snapshot that no file on disk has: what a caller holds after reading a file that is gone since. */
const GONE: FileSnapshot = { bytes: bytesOf('{}'), identity: 'gone', stamp: 'gone' };

/** Every public call, on `root` or a file or folder just below it. */
function everyCall(root: string): Record<string, (files: PrivateFiles) => unknown> {
  const file = join(root, 'owner.json');
  return {
    'directory(root)': (files) => files.directory(root),
    'directory(inside)': (files) => files.directory(join(root, 'locks')),
    read: (files) => files.read(file),
    'assert(absent)': (files) => files.assert(file, undefined),
    'assert(snapshot)': (files) => files.assert(file, GONE),
    entries: (files) => files.entries(root, []),
    stagingEntries: (files) => files.stagingEntries(),
    sweepStaging: (files) => files.sweepStaging(),
    create: (files) => files.create(file, bytesOf('{}')),
    createFolder: (files) => files.createFolder(join(root, 'service'), { 'format.json': bytesOf('{}') }),
    replace: (files) => files.replace(file, GONE, bytesOf('{}')),
    remove: (files) => files.remove(file, GONE),
    removeFolder: (files) => files.removeFolder(join(root, 'service'), {}),
  };
}

describe('a root that does not exist yet, nor its parent (a fresh machine)', () => {
  it.each([
    ['the root', 'state'],
    ['the root and its parent', join('fresh', 'state')],
  ])(
    'answers absence to every read with %s missing, changes nothing; every write is a ContractError, never a raw ENOENT',
    (_, below) => {
      const base = makeRoot();
      const root = join(base, below);
      const before = treeOf(base);
      const outcomes = Object.fromEntries(
        Object.entries(everyCall(root)).map(([name, call]) => [name, codeOf(() => call(new PrivateFiles(root)))]),
      );
      expect(outcomes).toEqual({
        'directory(root)': 'no error',
        'directory(inside)': 'no error',
        read: 'no error',
        'assert(absent)': 'no error',
        'assert(snapshot)': 'conflict',
        entries: 'no error',
        stagingEntries: 'no error',
        sweepStaging: 'no error',
        create: 'refused',
        createFolder: 'refused',
        replace: 'conflict',
        remove: 'conflict',
        removeFolder: 'conflict',
      });
      const files = new PrivateFiles(root);
      expect([files.directory(root), files.read(join(root, 'owner.json')), files.entries(root, [])]).toEqual([
        false,
        undefined,
        [],
      ]);
      expect(files.sweepStaging()).toEqual({ removed: [], kept: [] });
      expect(treeOf(base)).toEqual(before);
    },
  );

  it('refuses a new file with its path, naming the missing folder and how to make it', () => {
    const root = join(makeRoot(), 'fresh', 'state');
    const path = join(root, 'owner.json');
    const error = contractErrorOf(() => new PrivateFiles(root).create(path, bytesOf('{}')));
    expect({ code: error.code, path: error.path }).toEqual({ code: 'refused', path });
    expect(error.message).toBe(
      `${path}: its folder ${root} does not exist; make it first with directory('${root}', true)`,
    );
  });

  it('answers conflict, read again, for a file the caller read whose folder is gone', () => {
    const root = join(makeRoot(), 'fresh', 'state');
    const path = join(root, 'owner.json');
    const error = contractErrorOf(() => new PrivateFiles(root).replace(path, GONE, bytesOf('{}')));
    expect({ code: error.code, path: error.path }).toEqual({ code: 'conflict', path });
    expect(error.message).toBe(`${path}: absent: its folder ${root} no longer exists; read again`);
  });

  it('makes the root and its missing parents 0700 with directory(…, true), fsyncing each parent, then works as any root', () => {
    const base = makeRoot();
    const root = join(base, 'fresh', 'state');
    const steps: MutationStep[] = [];
    const files = new PrivateFiles(root, { hooks: { beforeMutation: (step) => steps.push(plainStep(step)) } });
    expect(files.directory(join(root, 'locks'), true)).toBe(true);
    expect(steps).toEqual([
      { operation: 'directory', action: 'mkdir', path: join(base, 'fresh') },
      { operation: 'directory', action: 'fsync-directory', path: base },
      { operation: 'directory', action: 'mkdir', path: root },
      { operation: 'directory', action: 'fsync-directory', path: join(base, 'fresh') },
      { operation: 'directory', action: 'mkdir', path: join(root, 'locks') },
      { operation: 'directory', action: 'fsync-directory', path: root },
    ]);
    expect([modeOf(join(base, 'fresh')), modeOf(root), modeOf(join(root, 'locks'))]).toEqual([0o700, 0o700, 0o700]);
    const created = files.create(join(root, 'locks', 'owner.json'), bytesOf('{"n":1}'));
    expect(files.read(join(root, 'locks', 'owner.json'))).toEqual(created);
  });

  it('leaves a folder above the root that already exists as it is: only the root and below are checked', () => {
    const base = makeRoot();
    const shared = join(base, 'shared');
    mkdirSync(shared, { mode: 0o755 });
    const root = join(shared, 'missing', 'state');
    expect(new PrivateFiles(root).directory(root, true)).toBe(true);
    expect([modeOf(shared), modeOf(join(shared, 'missing')), modeOf(root)]).toEqual([0o755, 0o700, 0o700]);
  });

  it('refuses, naming it, a parent of the root that is a dangling symbolic link, and a file above the root', () => {
    const base = makeRoot();
    const dangling = join(base, 'dangling');
    symlinkSync(join(base, 'nowhere'), dangling);
    const below = join(dangling, 'state');
    const error = contractErrorOf(() => new PrivateFiles(below).directory(below, true));
    expect({ code: error.code, path: error.path }).toEqual({ code: 'refused', path: below });
    expect(error.message).toContain(`${dangling} is a dangling symbolic link`);

    const file = join(base, 'file');
    new PrivateFiles(base).create(file, bytesOf('x'));
    const underFile = join(file, 'state');
    expect(codeOf(() => new PrivateFiles(underFile).directory(underFile, true))).toBe('refused');
    expect(codeOf(() => new PrivateFiles(underFile).read(join(underFile, 'owner.json')))).toBe('refused');
  });
});

describe("a root a person made with mkdir (this user's, 0755, empty)", () => {
  /** `base/state`, made as `mkdir` makes it under a 022 umask. */
  function mkdirRoot(): string {
    const root = join(makeRoot(), 'state');
    mkdirSync(root);
    chmodSync(root, 0o755);
    return root;
  }

  it('is not there yet for a reader, which changes nothing', () => {
    const root = mkdirRoot();
    const files = new PrivateFiles(root);
    expect([files.directory(root), files.read(join(root, 'owner.json')), files.entries(root, [])]).toEqual([
      false,
      undefined,
      [],
    ]);
    expect(modeOf(root)).toBe(0o755);
  });

  it('is made private by directory(…, true): chmod 0700 on it, then an fsync of it, and it then works as any root', () => {
    const root = mkdirRoot();
    const steps: MutationStep[] = [];
    const files = new PrivateFiles(root, { hooks: { beforeMutation: (step) => steps.push(plainStep(step)) } });
    expect(files.directory(join(root, 'locks'), true)).toBe(true);
    expect(steps).toEqual([
      { operation: 'directory', action: 'chmod', path: root },
      { operation: 'directory', action: 'fsync-directory', path: root },
      { operation: 'directory', action: 'mkdir', path: join(root, 'locks') },
      { operation: 'directory', action: 'fsync-directory', path: root },
    ]);
    expect(modeOf(root)).toBe(0o700);
    const created = files.create(join(root, 'locks', 'owner.json'), bytesOf('{"n":1}'));
    expect(files.read(join(root, 'locks', 'owner.json'))).toEqual(created);
  });

  it.each([
    ['a file', (root: string) => writeFileSync(join(root, 'notes.txt'), 'x', { mode: 0o600 })],
    ['an empty folder', (root: string) => mkdirSync(join(root, 'sub'), { mode: 0o700 })],
  ])('is refused, unchanged, with its chmod remedy when it holds %s: only an empty one is tightened', (_, fill) => {
    const root = mkdirRoot();
    fill(root);
    const error = contractErrorOf(() => new PrivateFiles(root).directory(root, true));
    expect({ code: error.code, path: error.path, remedy: error.remedy }).toEqual({
      code: 'refused',
      path: root,
      remedy: `take the group and other bits away: \`chmod 700 ${root}\``,
    });
    expect(modeOf(root)).toBe(0o755);
  });

  it("is refused, unchanged, when it is a symbolic link to such a folder, or another user's", () => {
    const root = mkdirRoot();
    const link = join(root, '..', 'link');
    symlinkSync(root, link);
    expect(UnsafeEntryError.breachOf(contractErrorOf(() => new PrivateFiles(link).directory(link, true)))).toEqual({
      rule: 'symbolic-link',
      path: link,
      expected: 'folder',
    });
    expect(modeOf(root)).toBe(0o755);
    if (process.geteuid?.() !== 0) return; // only root can give a folder away
    chownSync(root, 4242, 4242);
    expect(
      UnsafeEntryError.breachOf(contractErrorOf(() => new PrivateFiles(root).directory(root, true))),
    ).toMatchObject({ rule: 'foreign-owner', path: root });
    expect(modeOf(root)).toBe(0o755);
  });

  it('is tightened only at the root: an empty open folder below it is refused', () => {
    const root = makeRoot();
    const inside = join(root, 'locks');
    mkdirSync(inside);
    chmodSync(inside, 0o755);
    expect(
      UnsafeEntryError.breachOf(contractErrorOf(() => new PrivateFiles(root).directory(inside, true))),
    ).toMatchObject({ rule: 'open-mode', path: inside });
    expect(modeOf(inside)).toBe(0o755);
  });
});

/** A PrivateFiles whose hook, the first time `action` is about to run, removes `victim` as another process would. */
function removingAt(root: string, action: MutationAction, victim: string): PrivateFiles {
  let done = false;
  return new PrivateFiles(root, {
    hooks: {
      beforeMutation(step) {
        if (done || step.action !== action) return;
        done = true;
        rmSync(victim, { recursive: true, force: true });
      },
    },
  });
}

/** A root with `docs/` holding `file` and `service/format.json`, and their snapshots. */
function prepared() {
  const root = makeRoot();
  const files = new PrivateFiles(root);
  const docs = join(root, 'docs');
  files.directory(docs, true);
  const file = join(docs, 'file');
  const snapshot = files.create(file, bytesOf('old'));
  const service = join(docs, 'service');
  files.createFolder(service, { 'format.json': bytesOf('{}') });
  const folder = { 'format.json': files.read(join(service, 'format.json'))! };
  return { root, staging: join(root, STAGING_FOLDER), docs, file, service, snapshot, folder };
}

type Prepared = ReturnType<typeof prepared>;

/** One race: the call, the step before which `victim` is removed, and the path the conflict must carry. */
interface Race {
  readonly call: string;
  readonly before: MutationAction;
  readonly victim: (p: Prepared) => string;
  readonly run: (files: PrivateFiles, p: Prepared) => unknown;
  readonly names: (p: Prepared, path: string) => boolean;
}

const RACES: readonly Race[] = [
  {
    call: 'create, its folder removed before the link',
    before: 'link',
    victim: (p) => p.docs,
    run: (files, p) => files.create(join(p.docs, 'new'), bytesOf('x')),
    names: (p, path) => path === join(p.docs, 'new'),
  },
  {
    call: 'replace, its folder removed before the rename',
    before: 'rename',
    victim: (p) => p.docs,
    run: (files, p) => files.replace(p.file, p.snapshot, bytesOf('new')),
    names: (p, path) => path === p.file,
  },
  {
    call: 'replace, the staging folder removed before the temp is written',
    before: 'write',
    victim: (p) => p.staging,
    run: (files, p) => files.replace(p.file, p.snapshot, bytesOf('new')),
    names: (p, path) => path.startsWith(`${p.staging}/`),
  },
  {
    call: 'remove, the file removed before the unlink',
    before: 'unlink',
    victim: (p) => p.file,
    run: (files, p) => files.remove(p.file, p.snapshot),
    names: (p, path) => path === p.file,
  },
  {
    call: 'remove, its folder removed before the folder fsync',
    before: 'fsync-directory',
    victim: (p) => p.docs,
    run: (files, p) => files.remove(p.file, p.snapshot),
    names: (p, path) => path === p.docs,
  },
  {
    call: 'createFolder, its parent removed before the rename',
    before: 'rename',
    victim: (p) => p.docs,
    run: (files, p) => files.createFolder(join(p.docs, 'other'), { 'a.json': bytesOf('{}') }),
    names: (p, path) => path === join(p.docs, 'other'),
  },
  {
    call: 'removeFolder, the folder removed before the rename',
    before: 'rename',
    victim: (p) => p.service,
    run: (files, p) => files.removeFolder(p.service, p.folder),
    names: (p, path) => path === p.service,
  },
  {
    call: 'directory(…, true), a level removed before the mkdir below it',
    before: 'mkdir',
    victim: (p) => p.docs,
    run: (files, p) => files.directory(join(p.docs, 'a', 'b'), true),
    names: (p, path) => path === join(p.docs, 'a'),
  },
];

describe('a file or folder removed by another process between the checks and the system call', () => {
  it('is conflict naming the path, never a raw ENOENT, and leaves no temp in the staging folder', () => {
    const outcomes = RACES.map(({ call, before, victim, run, names }) => {
      const p = prepared();
      const error = contractErrorOf(() => run(removingAt(p.root, before, victim(p)), p));
      const staged = readdirSync(p.root).includes(STAGING_FOLDER) ? readdirSync(p.staging) : [];
      return { call, code: error.code, named: error.path !== undefined && names(p, error.path), staged };
    });
    expect(outcomes).toEqual(RACES.map(({ call }) => ({ call, code: 'conflict', named: true, staged: [] })));
  });

  it('is not an error for a temp of create that another process removed after the link: the file is published', () => {
    const root = makeRoot();
    let temp = '';
    const files = new PrivateFiles(root, {
      hooks: {
        beforeMutation(step) {
          if (step.action === 'write') temp = step.path;
          if (step.action === 'unlink') unlinkSync(temp);
        },
      },
    });
    const created = files.create(join(root, 'file'), bytesOf('x'));
    expect(new PrivateFiles(root).read(join(root, 'file'))).toEqual(created);
  });
});
