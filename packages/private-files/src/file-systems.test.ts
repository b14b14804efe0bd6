import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanUp, contractErrorOf, makeTemporaryFolder, mountOn, mountsAllowed } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import { fileSystemOf } from './index.js';

afterEach(cleanUp);

/** The magic number `stat -f` reads for `path`, the tool's own reading to compare with. */
function statMagic(path: string): number {
  return Number.parseInt(execFileSync('stat', ['-f', '-c', '%t', path], { encoding: 'utf8' }).trim(), 16);
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
    const folder = mountOn(makeTemporaryFolder('fs-tmpfs-'), 'mount', '-t', 'tmpfs', 'tmpfs');
    const tmpfs = { name: 'tmpfs', magic: 0x01021994, proven: true };
    expect(fileSystemOf(folder)).toEqual(tmpfs);
    expect(fileSystemOf(join(folder, 'fresh', 'state'))).toEqual(tmpfs);
  });

  it('names an overlay, proven', () => {
    const parent = makeTemporaryFolder('fs-overlay-');
    for (const name of ['lower', 'upper', 'work']) mkdirSync(join(parent, name));
    const layers = `lowerdir=${join(parent, 'lower')},upperdir=${join(parent, 'upper')},workdir=${join(parent, 'work')}`;
    const folder = mountOn(parent, 'mount', '-t', 'overlay', 'overlay', '-o', layers);
    expect(fileSystemOf(folder)).toEqual({ name: 'overlay', magic: 0x794c7630, proven: true });
  });

  it('answers unknown, not proven, for a file system not in its table (ramfs)', () => {
    const folder = mountOn(makeTemporaryFolder('fs-ramfs-'), 'mount', '-t', 'ramfs', 'ramfs');
    expect(fileSystemOf(folder)).toEqual({ name: 'unknown', magic: statMagic(folder), proven: false });
  });
});

describe.skipIf(!mountsAllowed('bindfs'))('fileSystemOf on a FUSE mount', () => {
  it('names a bindfs passthrough fuse, not proven, whatever its source folder is on', () => {
    const parent = makeTemporaryFolder('fs-fuse-');
    mkdirSync(join(parent, 'source'));
    const folder = mountOn(parent, 'bindfs', join(parent, 'source'));
    expect(fileSystemOf(join(parent, 'source'))).toEqual(fileSystemOf(parent));
    expect(fileSystemOf(folder)).toEqual({ name: 'fuse', magic: 0x65735546, proven: false });
    expect(fileSystemOf(join(folder, 'fresh', 'state'))).toEqual(fileSystemOf(folder));
  });
});
