import { chmodSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanUp, contractErrorOf, makeTemporaryFolder, mountOn, mountsAllowed } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import { fileSystemOf } from '@leasehold/private-files';
import { Registry, allowanceOf, stateHomeFileSystem } from './index.js';

afterEach(cleanUp);

/** A fresh ramfs, local but not in the table of proven file systems (its magic is all it is known by). */
function ramfs(): string {
  const folder = mountOn(makeTemporaryFolder('registry-ramfs-'), 'mount', '-t', 'ramfs', '-o', 'mode=0700', 'ramfs');
  chmodSync(folder, 0o700);
  return folder;
}

/** Whether the format document records an allowance, read as a person would. */
function recordedAllowance(stateHome: string): unknown {
  return JSON.parse(readFileSync(join(stateHome, 'v1', 'registry', 'format.json'), 'utf8')).allowedFileSystem;
}

describe.skipIf(!mountsAllowed('bindfs'))('a state home on a file system whose guarantees are not proven', () => {
  it('is refused at every operation, before anything is made, naming the file system, its magic and the remedy', async () => {
    const stateHome = join(ramfs(), 'state');
    const registry = new Registry(stateHome);
    const error = await registry.initialize().catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: 'refused', path: stateHome });
    expect(String(error)).toMatch(/the state home is on unknown \(statfs magic 0x858458f6\)/);
    expect((error as { remedy: string }).remedy).toContain(
      `leasehold init --allow-fs 0x858458f6 --state-home ${stateHome}`,
    );
    // Nothing was made.
    expect(() => readFileSync(stateHome)).toThrow(/ENOENT/);
    // A state home made there by other means is refused to readers too.
    mkdirSync(stateHome, { mode: 0o700 });
    expect(contractErrorOf(() => registry.list())).toMatchObject({ code: 'refused', path: stateHome });
  });

  it('is served once an allowance naming it is recorded, and only that file system is allowed', async () => {
    const stateHome = join(ramfs(), 'state');
    const allowed = allowanceOf(fileSystemOf(stateHome));
    expect(allowed).toEqual({ name: '0x858458f6', magic: 0x858458f6 });
    await new Registry(stateHome, { allowFileSystem: allowed }).initialize();
    expect(recordedAllowance(stateHome)).toEqual(allowed);
    // Every later caller reads the allowance from the state home: no option needed.
    expect(new Registry(stateHome).list().entries).toEqual([]);
    // A workspace on a file system of that type is allowed by it (an allowance names a type, not a
    // mount); one on another unproven type is not.
    const workspace = join(ramfs(), 'workspace');
    mkdirSync(workspace, { mode: 0o700 });
    expect(() => new Registry(stateHome).checkWorkspace(workspace)).not.toThrow();
    const other = mountOn(
      makeTemporaryFolder('registry-fuse-'),
      'bindfs',
      makeTemporaryFolder('registry-fuse-source-'),
    );
    expect(contractErrorOf(() => new Registry(stateHome).checkWorkspace(other))).toMatchObject({
      code: 'refused',
      path: other,
    });
  });

  it('is judged by stateHomeFileSystem as a fact, made or not: not allowed, then allowed once recorded', async () => {
    const stateHome = join(ramfs(), 'state');
    const fileSystem = { name: 'unknown', magic: 0x858458f6, proven: false };
    expect(stateHomeFileSystem(stateHome)).toEqual({ fileSystem, allowed: false });
    mkdirSync(stateHome, { mode: 0o700 });
    expect(stateHomeFileSystem(stateHome)).toEqual({ fileSystem, allowed: false });
    await new Registry(stateHome, { allowFileSystem: allowanceOf(fileSystem) }).initialize();
    expect(stateHomeFileSystem(stateHome)).toEqual({ fileSystem, allowed: true });
    // A proven one needs no allowance, and is not said to have one.
    const local = join(makeTemporaryFolder('registry-judged-'), 'state');
    expect(stateHomeFileSystem(local)).toEqual({ fileSystem: fileSystemOf(local), allowed: false });
  });

  it('records an allowance in a state home made before it, keeping its backend', async () => {
    const base = makeTemporaryFolder('registry-allow-later-');
    const stateHome = join(base, 'state');
    await new Registry(stateHome).initialize();
    expect(recordedAllowance(stateHome)).toBeUndefined();
    const allowed = allowanceOf(fileSystemOf(stateHome));
    await new Registry(stateHome, { allowFileSystem: allowed }).initialize();
    expect(recordedAllowance(stateHome)).toEqual(allowed);
    expect(new Registry(stateHome).list().entries).toEqual([]);
  });

  it('refuses a workspace on a FUSE mount of a state home on a proven file system', () => {
    const stateHome = join(makeTemporaryFolder('registry-fuse-home-'), 'state');
    const source = makeTemporaryFolder('registry-fuse-source-');
    const fuse = mountOn(makeTemporaryFolder('registry-fuse-'), 'bindfs', source);
    const error = contractErrorOf(() => new Registry(stateHome).checkWorkspace(fuse));
    expect(error).toMatchObject({ code: 'refused', path: fuse });
    expect(error.message).toMatch(/the workspace is on fuse \(statfs magic 0x65735546\)/);
    expect(error.remedy).toContain('keep the workspace on a local disk');
    // An allowance is earned in the state home: for a workspace's file system, the state home goes there too.
    expect(error.remedy).toContain('and the state home on that file system too');
    expect(error.remedy).toContain('leasehold init --allow-fs fuse');
  });
});
