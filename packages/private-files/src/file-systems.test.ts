import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanUp, contractErrorOf, makeTemporaryFolder } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import { fileSystemOf } from './index.js';

/** What this test mounted, unmounted (last first) before its temp folders are removed, even when it failed. */
const mounted: string[] = [];

afterEach(async () => {
  for (const folder of mounted.splice(0).reverse()) execFileSync('umount', [folder]);
  await cleanUp();
});

/** Runs `command ...options <parent>/mounted` on that fresh folder (a mount), and answers the folder. */
function mount(parent: string, command: string, ...options: string[]): string {
  const folder = join(parent, 'mounted');
  mkdirSync(folder);
  execFileSync(command, [...options, folder], { stdio: 'pipe' });
  mounted.push(folder);
  return folder;
}

/** The magic number `stat -f` reads for `path`, the tool's own reading to compare with. */
function statMagic(path: string): number {
  return Number.parseInt(execFileSync('stat', ['-f', '-c', '%t', path], { encoding: 'utf8' }).trim(), 16);
}

/**
 * Whether mounts can be made here: only root mounts. Elsewhere the mount tests are skipped, said
 * once; under `CI=true` (where the tests run as root) a missing root or `bindfs` throws instead.
 */
function mountsAllowed(...tools: readonly 'bindfs'[]): boolean {
  const missing = [
    ...(process.getuid?.() === 0 ? [] : ['root (mount needs it)']),
    ...tools.filter((tool) => spawnSync(tool, ['--version']).error !== undefined).map((tool) => `\`${tool}\``),
  ];
  if (missing.length === 0) return true;
  if (process.env.CI === 'true')
    throw new Error(`missing: ${missing.join(', ')}, and CI=true: run as root with bindfs`);
  console.warn(`missing: ${missing.join(', ')}: the mount tests that need them are skipped`);
  return false;
}

describe('fileSystemOf', () => {
  it('answers the magic that stat -f reads, for the temp folder and the working folder', () => {
    for (const path of [tmpdir(), process.cwd()]) expect(fileSystemOf(path).magic).toBe(statMagic(path));
  });

  it('judges a path not made yet, or below a file, by its nearest existing ancestor folder', () => {
    const parent = makeTemporaryFolder('fs-missing-');
    writeFileSync(join(parent, 'file'), '');
    const there = fileSystemOf(parent);
    expect(fileSystemOf(join(parent, 'fresh', 'state', 'home'))).toEqual(there);
    expect(fileSystemOf(join(parent, 'file', 'state'))).toEqual(there);
  });

  it('refuses a path it cannot follow (a loop of links), naming it', () => {
    const parent = makeTemporaryFolder('fs-loop-');
    symlinkSync('loop', join(parent, 'loop'));
    const path = join(parent, 'loop', 'state');
    const error = contractErrorOf(() => fileSystemOf(path));
    expect([error.code, error.path, error.message]).toEqual(['refused', path, expect.stringContaining('ELOOP')]);
    expect(error.remedy).toBeDefined();
  });
});

describe.skipIf(!mountsAllowed())('fileSystemOf on fresh mounts', () => {
  it('names a fresh tmpfs, proven, and judges a path not made yet in it by the mount', () => {
    const folder = mount(makeTemporaryFolder('fs-tmpfs-'), 'mount', '-t', 'tmpfs', 'tmpfs');
    const tmpfs = { name: 'tmpfs', magic: 0x01021994, proven: true };
    expect(fileSystemOf(folder)).toEqual(tmpfs);
    expect(fileSystemOf(join(folder, 'fresh', 'state'))).toEqual(tmpfs);
  });

  it('names an overlay, proven', () => {
    const parent = makeTemporaryFolder('fs-overlay-');
    for (const name of ['lower', 'upper', 'work']) mkdirSync(join(parent, name));
    const layers = `lowerdir=${join(parent, 'lower')},upperdir=${join(parent, 'upper')},workdir=${join(parent, 'work')}`;
    const folder = mount(parent, 'mount', '-t', 'overlay', 'overlay', '-o', layers);
    expect(fileSystemOf(folder)).toEqual({ name: 'overlay', magic: 0x794c7630, proven: true });
  });

  it('answers unknown, not proven, for a file system not in its table (ramfs)', () => {
    const folder = mount(makeTemporaryFolder('fs-ramfs-'), 'mount', '-t', 'ramfs', 'ramfs');
    expect(fileSystemOf(folder)).toEqual({ name: 'unknown', magic: statMagic(folder), proven: false });
  });
});

describe.skipIf(!mountsAllowed('bindfs'))('fileSystemOf on a FUSE mount', () => {
  it('names a bindfs passthrough fuse, not proven, whatever its source folder is on', () => {
    const parent = makeTemporaryFolder('fs-fuse-');
    mkdirSync(join(parent, 'source'));
    const folder = mount(parent, 'bindfs', join(parent, 'source'));
    expect(fileSystemOf(join(parent, 'source'))).toEqual(fileSystemOf(parent));
    expect(fileSystemOf(folder)).toEqual({ name: 'fuse', magic: 0x65735546, proven: false });
    expect(fileSystemOf(join(folder, 'fresh', 'state'))).toEqual(fileSystemOf(folder));
  });
});
