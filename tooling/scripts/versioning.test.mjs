// The versioning policy, pinned: what `changeset version` and `changeset
// status` do with this repository's own configuration and pending changesets,
// run for real in a scratch copy (a git repository of its own on `main`).
import { execFileSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHANGESET = join(ROOT, 'node_modules', '@changesets', 'cli', 'bin.js');
const PUBLIC = [
  'cli',
  'contracts',
  'coordination',
  'etcd',
  'private-files',
  'recovery',
  'registry',
  'state-home',
  'transport',
].map((name) => `@leasehold/${name}`);
const PRIVATE = ['@leasehold/bench', '@leasehold/test-utils', '@leasehold/package-checks', '@leasehold/example-daemon'];

/** Every file `changeset` reads or writes: the root manifest, the workspace list, the changesets, the changelog lines, each package's manifest and changelog. */
function copyOfRepository() {
  const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'leasehold-versioning-')));
  for (const file of ['package.json', 'pnpm-workspace.yaml', '.changeset', 'tooling/changelog.cjs'])
    cpSync(join(ROOT, file), join(scratch, file), { recursive: true });
  for (const group of ['packages', 'examples']) {
    for (const name of readdirSync(join(ROOT, group))) {
      for (const file of ['package.json', 'CHANGELOG.md'])
        if (existsSync(join(ROOT, group, name, file)))
          cpSync(join(ROOT, group, name, file), join(scratch, group, name, file));
    }
  }
  git(scratch, 'init', '-q', '-b', 'main');
  commitAll(scratch, 'the repository as it is');
  return scratch;
}

function git(cwd, ...args) {
  return execFileSync('git', ['-c', 'user.name=versioning test', '-c', 'user.email=test@leasehold.invalid', ...args], {
    cwd,
    encoding: 'utf8',
  });
}

function commitAll(cwd, message) {
  git(cwd, 'add', '-A');
  git(cwd, 'commit', '-q', '--allow-empty', '-m', message);
}

function changeset(cwd, ...args) {
  return execFileSync(process.execPath, [CHANGESET, ...args], { cwd, encoding: 'utf8', stdio: 'pipe' });
}

function manifestOf(root, name) {
  return JSON.parse(readFileSync(join(root, folderOf(name), 'package.json'), 'utf8'));
}

/**
 * The releases `changeset status` plans for the pending changesets and, when `bumps` names any, one
 * sample changeset of them (left in place for a `changeset version` after): each released package
 * with its bump and new version.
 */
function plannedReleases(scratch, bumps) {
  const names = Object.entries(bumps).map(([name, type]) => `"${name}": ${type}`);
  if (names.length > 0)
    writeFileSync(
      join(scratch, '.changeset', 'sample-change.md'),
      `---\n${names.join('\n')}\n---\n\nA sample change.\n`,
    );
  const report = join(scratch, '..', `${basename(scratch)}-status.json`);
  changeset(scratch, 'status', '--output', report);
  const { releases } = JSON.parse(readFileSync(report, 'utf8'));
  rmSync(report);
  return Object.fromEntries(
    releases
      .filter((release) => release.type !== 'none')
      .map((release) => [release.name, `${release.type} ${release.newVersion}`]),
  );
}

/** The folder of a package, relative to the repository (or a copy of it). */
function folderOf(name) {
  return name.startsWith('@leasehold/example-')
    ? `examples/${name.slice('@leasehold/example-'.length)}`
    : `packages/${name.slice('@leasehold/'.length)}`;
}

/** The files `changeset version` changed, added or removed in `scratch`, relative to it, sorted. */
function changedFiles(scratch) {
  return git(scratch, 'status', '--porcelain', '--untracked-files=all')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.slice(3))
    .sort();
}

describe('the first release', () => {
  it('is made: every public package is released, its changelog ending on 0.1.0, its first release; private packages are 0.0.0, with none', () => {
    for (const name of PUBLIC) {
      expect(manifestOf(ROOT, name).version, name).toMatch(/^0\.[1-9][0-9]*\.[0-9]+$/);
      const changelog = readFileSync(join(ROOT, folderOf(name), 'CHANGELOG.md'), 'utf8');
      expect(changelog.startsWith(`# ${name}\n\n## `), name).toBe(true);
      const first = changelog.slice(changelog.lastIndexOf('\n## '));
      expect(first.startsWith('\n## 0.1.0\n\n### Minor Changes\n\n- First release. '), name).toBe(true);
      // Plain entries for users: no commit hash.
      expect(changelog, name).not.toMatch(/\b[0-9a-f]{7,40}\b/);
    }
    for (const name of PRIVATE) {
      expect(manifestOf(ROOT, name).version, name).toBe('0.0.0');
      expect(existsSync(join(ROOT, folderOf(name), 'CHANGELOG.md')), name).toBe(false);
    }
  });
});

describe('the version step (changesets, in a scratch copy of the repository)', () => {
  let scratch;
  beforeAll(() => {
    scratch = copyOfRepository();
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('changes nothing but what the pending changesets plan: their versions and changelogs, and the changesets themselves', () => {
    const pending = readdirSync(join(scratch, '.changeset')).filter((file) => file.endsWith('.md'));
    const planned = pending.length === 0 ? {} : plannedReleases(scratch, {});
    changeset(scratch, 'version');
    const expected = [
      ...pending.map((file) => `.changeset/${file}`),
      ...Object.keys(planned).flatMap((name) => [`${folderOf(name)}/CHANGELOG.md`, `${folderOf(name)}/package.json`]),
    ].sort();
    expect(changedFiles(scratch)).toEqual(expected);
    for (const [name, plan] of Object.entries(planned))
      expect(manifestOf(scratch, name).version, name).toBe(plan.split(' ')[1]);
    for (const name of PRIVATE) expect(manifestOf(scratch, name).version, name).toBe('0.0.0');
    commitAll(scratch, 'the pending changesets released');
  });

  it('releases a patch of one package alone, end to end: its version, its changelog entry, no other package', () => {
    const before = manifestOf(scratch, '@leasehold/contracts').version;
    const after = before.replace(/[0-9]+$/, (patch) => String(Number(patch) + 1));
    expect(plannedReleases(scratch, { '@leasehold/contracts': 'patch' })).toEqual({
      '@leasehold/contracts': `patch ${after}`,
    });
    changeset(scratch, 'version');
    // In range: every dependent's `workspace:^` publishes as ^0.x.y, which the patch meets.
    // The sample changeset was never committed: consumed, it leaves no trace.
    expect(changedFiles(scratch)).toEqual(['packages/contracts/CHANGELOG.md', 'packages/contracts/package.json']);
    expect(manifestOf(scratch, '@leasehold/contracts').version).toBe(after);
    const changelog = readFileSync(join(scratch, 'packages', 'contracts', 'CHANGELOG.md'), 'utf8');
    expect(
      changelog.startsWith(
        `# @leasehold/contracts\n\n## ${after}\n\n### Patch Changes\n\n- A sample change.\n\n## ${before}\n`,
      ),
    ).toBe(true);
    git(scratch, 'checkout', '-q', '--', '.');
    git(scratch, 'clean', '-qfd');
  });

  it('releases every dependent of a minor on 0.x with a patch that moves its range, and no private package', () => {
    // On 0.x a minor leaves ^0.1: each package that depends on it (in its dependencies) moves to ^0.2.
    const next = (name, type) => {
      const [major, minor, patch] = manifestOf(scratch, name).version.split('.').map(Number);
      return `${type} ${type === 'patch' ? `${major}.${minor}.${patch + 1}` : `${major}.${minor + 1}.0`}`;
    };
    expect(plannedReleases(scratch, { '@leasehold/contracts': 'minor' })).toEqual(
      Object.fromEntries(PUBLIC.map((name) => [name, next(name, name === '@leasehold/contracts' ? 'minor' : 'patch')])),
    );
    rmSync(join(scratch, '.changeset', 'sample-change.md'));
  });
});
