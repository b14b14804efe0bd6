// The versioning policy, pinned: what `changeset version` and `changeset
// status` do with this repository's own configuration and pending changesets,
// run for real in a scratch copy (a git repository of its own on `main`).
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHANGESET = join(ROOT, 'node_modules', '@changesets', 'cli', 'bin.js');
const STABLE = ['cli', 'contracts', 'coordination', 'private-files', 'recovery', 'registry', 'transport'].map(
  (name) => `@leasehold/${name}`,
);
// A preview stays on 0.x until the command line and the shared ownership interface use it.
const PREVIEW = ['@leasehold/etcd', '@leasehold/state-home'];

/** Every file `changeset` reads: the root manifest, the workspace list, the changesets, the changelog lines, each package's manifest. */
function copyOfRepository() {
  const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'leasehold-versioning-')));
  for (const file of ['package.json', 'pnpm-workspace.yaml', '.changeset', 'tooling/changelog.cjs'])
    cpSync(join(ROOT, file), join(scratch, file), { recursive: true });
  for (const group of ['packages', 'examples']) {
    for (const name of readdirSync(join(ROOT, group)))
      cpSync(join(ROOT, group, name, 'package.json'), join(scratch, group, name, 'package.json'));
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

function manifestOf(scratch, name) {
  const folder = name.startsWith('@leasehold/example-')
    ? join('examples', name.slice('@leasehold/example-'.length))
    : join('packages', name.slice('@leasehold/'.length));
  return JSON.parse(readFileSync(join(scratch, folder, 'package.json'), 'utf8'));
}

/** The releases `changeset status` plans for one sample changeset: each released package with its new version. */
function plannedReleases(scratch, bumps) {
  const names = Object.entries(bumps).map(([name, type]) => `"${name}": ${type}`);
  writeFileSync(join(scratch, '.changeset', 'sample-change.md'), `---\n${names.join('\n')}\n---\n\nA sample change.\n`);
  changeset(scratch, 'status', '--output', 'status.json');
  const { releases } = JSON.parse(readFileSync(join(scratch, 'status.json'), 'utf8'));
  return Object.fromEntries(
    releases
      .filter((release) => release.type !== 'none')
      .map((release) => [release.name, `${release.type} ${release.newVersion}`]),
  );
}

describe('the versioning policy (changesets, in a scratch copy of the repository)', () => {
  let scratch;
  beforeAll(() => {
    scratch = copyOfRepository();
    changeset(scratch, 'version');
    commitAll(scratch, 'the first release');
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('makes the pending changesets the first release: every stable package 1.0.0, the preview 0.1.0, private packages untouched', () => {
    for (const name of STABLE) expect(manifestOf(scratch, name).version, name).toBe('1.0.0');
    for (const name of PREVIEW) expect(manifestOf(scratch, name).version, name).toBe('0.1.0');
    for (const name of [
      '@leasehold/bench',
      '@leasehold/test-utils',
      '@leasehold/package-checks',
      '@leasehold/example-daemon',
    ]) {
      expect(manifestOf(scratch, name).version, name).toBe('0.0.0');
    }
    expect(readdirSync(join(scratch, '.changeset'))).toEqual(['config.json']);
  });

  it('writes each changelog as plain entries for users, with no commit hashes', () => {
    const first = [
      ...STABLE.map((name) => [name, '1.0.0', 'Major']),
      ...PREVIEW.map((name) => [name, '0.1.0', 'Minor']),
    ];
    for (const [name, version, kind] of first) {
      const changelog = readFileSync(
        join(scratch, 'packages', name.slice('@leasehold/'.length), 'CHANGELOG.md'),
        'utf8',
      );
      expect(changelog.startsWith(`# ${name}\n\n## ${version}\n\n### ${kind} Changes\n\n- `), name).toBe(true);
      expect(changelog, name).not.toMatch(/\b[0-9a-f]{7,40}\b/);
    }
    for (const name of ['bench', 'test-utils', 'package-checks']) {
      expect(() => readFileSync(join(scratch, 'packages', name, 'CHANGELOG.md'))).toThrow(/ENOENT/);
    }
  });

  it('releases a lower layer alone for a minor or a patch: its dependents are still in range', () => {
    expect(plannedReleases(scratch, { '@leasehold/contracts': 'minor' })).toEqual({
      '@leasehold/contracts': 'minor 1.1.0',
    });
    expect(plannedReleases(scratch, { '@leasehold/registry': 'patch' })).toEqual({
      '@leasehold/registry': 'patch 1.0.1',
    });
  });

  it("releases every dependent of a major with a patch that moves its range, and nothing else's", () => {
    expect(plannedReleases(scratch, { '@leasehold/coordination': 'major' })).toEqual({
      '@leasehold/coordination': 'major 2.0.0',
      '@leasehold/recovery': 'patch 1.0.1',
      '@leasehold/transport': 'patch 1.0.1',
      '@leasehold/state-home': 'patch 0.1.1',
      // Not the cli: it depends on coordination as a devDependency only (below its seam), and its
      // ranges on transport and state-home still hold their patches.
    });
  });
});
