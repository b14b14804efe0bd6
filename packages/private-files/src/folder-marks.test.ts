import { execFileSync } from 'node:child_process';
import { chmodSync, linkSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { folderMarkPlaces, type ContractError } from '@leasehold/contracts';
import { cleanUp, codeOf, makeTemporaryFolder, mountOn, mountsAllowed } from '@leasehold/test-utils';
import { FolderMarks, currentProcess, describeUser, type MutationStep } from './index.js';
import { stagingName } from './staging-name.js';

afterEach(cleanUp);

// The folder's own mark (SPEC 5.1a): the one file of Leasehold in the user's folder, readable by
// everyone, published exclusively and durably, removed by compare-and-swap, read as untrusted input.

const BYTES = new TextEncoder().encode('{"mark":1}');
const BOUND = 32768;

function workspace(): string {
  const root = join(makeTemporaryFolder('leasehold-marks-'), 'workspace');
  mkdirSync(root, { mode: 0o755 });
  return root;
}

function errorOf(run: () => unknown): ContractError {
  try {
    run();
  } catch (error) {
    return error as ContractError;
  }
  throw new Error('no error');
}

describe('FolderMarks', () => {
  it('publishes a mark readable by everyone whatever the umask, hides its folder from git, and removes it by compare-and-swap', () => {
    const root = workspace();
    const places = folderMarkPlaces(root);
    const marks = new FolderMarks();
    const umask = process.umask(0o077);
    let created;
    try {
      created = marks.create(places.mark, BYTES, BOUND);
    } finally {
      process.umask(umask);
    }
    expect(statSync(places.folder).mode & 0o777).toBe(0o755);
    expect(statSync(places.mark).mode & 0o777).toBe(0o644);
    expect(statSync(places.ignore).mode & 0o777).toBe(0o644);
    expect(readdirSync(places.folder).sort()).toEqual(['.gitignore', 'owner.json']);
    expect(marks.read(places.mark, BOUND)).toEqual(created);
    expect(created.uid).toBe(process.geteuid!());
    expect(codeOf(() => marks.create(places.mark, BYTES, BOUND))).toBe('conflict');

    marks.remove(places.mark, created, BOUND);
    expect(marks.read(places.mark, BOUND)).toBeUndefined();
    // The dot-folder stays with its .gitignore; a second mark goes in beside it.
    expect(readdirSync(places.folder)).toEqual(['.gitignore']);
    const again = marks.create(places.mark, BYTES, BOUND);
    expect(codeOf(() => marks.remove(places.mark, created, BOUND))).toBe('conflict');
    marks.remove(places.mark, again, BOUND);
  });

  it('tells every mutating step, with the modes of what it makes', () => {
    const root = workspace();
    const places = folderMarkPlaces(root);
    const steps: MutationStep[] = [];
    new FolderMarks({ hooks: { beforeMutation: (step) => steps.push(step) } }).create(places.mark, BYTES, BOUND);
    expect(
      steps.map(({ action, path }) => `${action} ${path.replace(/\.leasehold\/\.[^/]+\.tmp$/, '.leasehold/<temp>')}`),
    ).toEqual([
      `mkdir ${places.folder}`,
      `fsync-directory ${root}`,
      `write ${places.folder}/<temp>`,
      `fsync ${places.folder}/<temp>`,
      `link ${places.ignore}`,
      `unlink ${places.folder}/<temp>`,
      `write ${places.folder}/<temp>`,
      `fsync ${places.folder}/<temp>`,
      `link ${places.mark}`,
      `unlink ${places.folder}/<temp>`,
      `fsync-directory ${places.folder}`,
    ]);
    expect(steps.filter((step) => step.mode !== undefined).map((step) => step.mode)).toEqual([0o755, 0o644, 0o644]);
  });

  it('refuses a link, a FIFO, a folder, an oversized file or one others may write in its place, naming it, and never hangs', () => {
    const cases: [string, (mark: string) => void][] = [
      ['a symbolic link', (mark) => symlinkSync('/etc/hostname', mark)],
      ['a FIFO', (mark) => execFileSync('mkfifo', [mark])],
      ['a folder', (mark) => mkdirSync(mark)],
      ['an oversized file', (mark) => writeFileSync(mark, 'x'.repeat(BOUND + 1), { mode: 0o644 })],
      [
        'a file others may write',
        (mark) => {
          writeFileSync(mark, '{}');
          chmodSync(mark, 0o666);
        },
      ],
    ];
    for (const [name, make] of cases) {
      const places = folderMarkPlaces(workspace());
      mkdirSync(places.folder, { mode: 0o755 });
      make(places.mark);
      const refusal = errorOf(() => new FolderMarks().read(places.mark, BOUND));
      expect(refusal.code, name).toBe('refused');
      expect(refusal.message, name).toContain(places.mark);
      expect(
        codeOf(() => new FolderMarks().create(places.mark, BYTES, BOUND)),
        name,
      ).toBe('refused');
    }
    const linked = folderMarkPlaces(workspace());
    symlinkSync(workspace(), linked.folder);
    expect(codeOf(() => new FolderMarks().read(linked.mark, BOUND))).toBe('refused');
  });

  it("reads a mark with a dead writer's second link, and sweeps that writer's temp at the next publication", () => {
    const places = folderMarkPlaces(workspace());
    const marks = new FolderMarks();
    const created = marks.create(places.mark, BYTES, BOUND);
    // A writer on another boot died between its link and its temp's unlink.
    const dead = join(places.folder, `.${stagingName({ pid: 1, host: 'elsewhere' })}`);
    const gone = join(places.folder, `.${stagingName({ pid: 2 ** 31 - 2, host: currentProcess().host })}`);
    linkSync(places.mark, gone);
    writeFileSync(dead, 'x');
    expect(marks.read(places.mark, BOUND)?.identity).toBe(created.identity);
    marks.remove(places.mark, marks.read(places.mark, BOUND)!, BOUND);
    marks.create(places.mark, BYTES, BOUND);
    // The gone writer's temp (this host) is swept; another host's cannot be told gone, and stays.
    expect(readdirSync(places.folder).sort()).toEqual(
      ['.gitignore', dead.slice(places.folder.length + 1), 'owner.json'].sort(),
    );
  });

  it('finds the nearest marked folder above a root', () => {
    const outer = workspace();
    const inner = join(outer, 'a', 'b');
    mkdirSync(inner, { recursive: true });
    const marks = new FolderMarks();
    expect(marks.markedAncestor(inner, BOUND)).toBeUndefined();
    const created = marks.create(folderMarkPlaces(outer).mark, BYTES, BOUND);
    expect(marks.markedAncestor(inner, BOUND)).toEqual({ root: outer, mark: created });
    expect(marks.markedAncestor(outer, BOUND)).toBeUndefined();
  });

  it('names a user in words', () => {
    expect(describeUser(0)).toBe('root (uid 0)');
    expect(describeUser(2 ** 31 - 3)).toBe(`uid ${2 ** 31 - 3}`);
  });
});

describe.skipIf(!mountsAllowed())('a folder where the mark cannot be written', () => {
  it('is refused with the reason, and nothing is left behind', () => {
    const root = mountOn(makeTemporaryFolder('leasehold-marks-'), 'mount', '-t', 'tmpfs', '-o', 'ro', 'tmpfs');
    const refusal = errorOf(() => new FolderMarks().create(folderMarkPlaces(root).mark, BYTES, BOUND));
    expect(refusal.code).toBe('refused');
    expect(refusal.message).toBe(`${root}: the file system is read-only; the folder's owner mark lives there`);
    expect(readdirSync(root)).toEqual([]);
  });
});
