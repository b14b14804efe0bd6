import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  codeOf,
  contractErrorOf,
  makeTemporaryFolder,
  modeOf,
  namesIn,
  pathExists,
} from '@leasehold/test-utils';
import { TEST_ROOT, reservation } from '../test/helpers.js';
import { Registry, ensureStateHome } from './index.js';

afterEach(cleanUp);

/** A state home two levels below a fresh temp folder, neither level made yet (a fresh machine's ~/.local/state). */
function unmadeStateHome(): { base: string; stateHome: string } {
  const base = makeTemporaryFolder('registry-state-home-');
  return { base, stateHome: join(base, 'fresh', 'local', 'state') };
}

describe('a state home that does not exist yet, nor its parents', () => {
  it('reads as an empty one, and readers create nothing', () => {
    const { base, stateHome } = unmadeStateHome();
    const registry = new Registry(stateHome);
    expect(registry.checkStateHome()).toBe(false);
    expect(registry.list()).toEqual({ entries: [], format: undefined, roots: undefined });
    expect(registry.rowOf('/srv/workspace-1')).toEqual({ row: undefined, roots: undefined });
    expect(registry.readLock()).toBeUndefined();
    expect(registry.readMarkers()).toEqual([]);
    expect(namesIn(base)).toEqual([]);
  });

  it('is made 0700 with its missing parents (0700 too) by the first transaction, which then reserves', async () => {
    const { base, stateHome } = unmadeStateHome();
    const registry = new Registry(stateHome);
    const row = reservation(stateHome, 1);
    await registry.transaction(row.root, (transaction) => transaction.reserve(row));
    for (const folder of [join(base, 'fresh'), join(base, 'fresh', 'local'), stateHome])
      expect(modeOf(folder)).toBe(0o700);
    expect(registry.rowOf(row.root).row).toEqual(row);
  });

  it('is made by ensureStateHome alone, which is idempotent', () => {
    const { stateHome } = unmadeStateHome();
    ensureStateHome(stateHome);
    ensureStateHome(stateHome);
    expect(modeOf(stateHome)).toBe(0o700);
    expect(namesIn(stateHome)).toEqual([]);
  });
});

describe('a state home that cannot be made', () => {
  /** Each way a level above the state home can stand in the way, and the path the refusal names. */
  const blocked: readonly [string, (base: string) => { stateHome: string; blocker: string }][] = [
    [
      'its parent is a file',
      (base) => {
        writeFileSync(join(base, 'file'), 'not a folder');
        return { stateHome: join(base, 'file', 'state'), blocker: join(base, 'file') };
      },
    ],
    [
      'a level further up is a file',
      (base) => {
        writeFileSync(join(base, 'file'), 'not a folder');
        return { stateHome: join(base, 'file', 'local', 'state'), blocker: join(base, 'file') };
      },
    ],
    [
      'its parent is a link to nothing',
      (base) => {
        symlinkSync(join(base, 'nowhere'), join(base, 'dangling'));
        return { stateHome: join(base, 'dangling', 'state'), blocker: join(base, 'dangling') };
      },
    ],
  ];

  it.each(blocked)(
    '%s: a transaction and ensureStateHome are refused, naming the state home and the level, and write nothing',
    async (_, make) => {
      const base = makeTemporaryFolder('registry-state-home-');
      const { stateHome, blocker } = make(base);
      const before = namesIn(base);
      const error = contractErrorOf(() => ensureStateHome(stateHome));
      expect(error).toMatchObject({ code: 'refused', path: stateHome });
      // private-files names the level that stands in the way, and what to do about it.
      expect(error.message).toMatch(
        new RegExp(
          `^${stateHome}: .*${blocker} is (not a folder; make it one or choose another path|a dangling symbolic link; point it at a folder or remove it)`,
        ),
      );
      await expect(new Registry(stateHome).transaction(TEST_ROOT, () => undefined)).rejects.toMatchObject({
        code: 'refused',
        path: stateHome,
      });
      expect(namesIn(base)).toEqual(before);
    },
  );

  it('a dangling link above it reads as no state home yet; one that is a file is refused to readers', () => {
    const base = makeTemporaryFolder('registry-state-home-');
    symlinkSync(join(base, 'nowhere'), join(base, 'dangling'));
    writeFileSync(join(base, 'file'), 'not a folder');
    expect(new Registry(join(base, 'dangling', 'state')).list().entries).toEqual([]);
    expect(codeOf(() => new Registry(join(base, 'file', 'state')).list())).toBe('refused');
    expect(pathExists(join(base, 'nowhere'))).toBe(false);
  });

  it("a state home made with mkdir (this user's, 0755, empty) reads as none yet, and the first transaction makes it 0700", async () => {
    const base = makeTemporaryFolder('registry-state-home-');
    const stateHome = join(base, 'state');
    mkdirSync(stateHome);
    chmodSync(stateHome, 0o755);
    const registry = new Registry(stateHome);
    expect([registry.checkStateHome(), registry.list().entries]).toEqual([false, []]);
    expect(modeOf(stateHome)).toBe(0o755);
    const row = reservation(stateHome, 1);
    await registry.transaction(TEST_ROOT, (transaction) => transaction.reserve(row));
    expect(modeOf(stateHome)).toBe(0o700);
    expect(registry.list().entries).toEqual([row]);
  });

  it('a state home whose parent exists is made without touching the parent', async () => {
    const base = makeTemporaryFolder('registry-state-home-');
    const stateHome = join(base, 'kept', 'state');
    mkdirSync(dirname(stateHome));
    chmodSync(dirname(stateHome), 0o755);
    await new Registry(stateHome).transaction(TEST_ROOT, () => undefined);
    expect(modeOf(dirname(stateHome))).toBe(0o755);
    expect(modeOf(stateHome)).toBe(0o700);
  });
});
