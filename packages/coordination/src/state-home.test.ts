import { symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, codeOf, codeOfAsync, makePlace, modeOf, namesIn, type TestPlace } from '@leasehold/test-utils';
import { ANY_PORT, BOUND, makeWorkspace } from '../test/functional-helpers.js';
import {
  Checkout,
  acquireWorkspace,
  initializeWorkspace,
  inspectWorkspace,
  openWorkspace,
  workspaceConfiguration,
  workspaceLocalAccess,
} from './index.js';

afterEach(cleanUp);

/** A workspace, and a state home two levels below the temp folder whose parents are not made yet (a fresh machine's ~/.local/state). */
function freshMachine(): { place: TestPlace; root: string; stateHome: string } {
  const place = makePlace('coordination');
  return { place, root: makeWorkspace(place, 'app'), stateHome: join(place.base, 'home', 'local', 'state') };
}

describe('a state home that does not exist yet, nor its parents', () => {
  it('reads as empty to every reader, which creates nothing', () => {
    const { place, root, stateHome } = freshMachine();
    const coordination = openWorkspace(root, { stateHome });
    expect(inspectWorkspace(coordination)).toEqual({ status: 'absent' });
    expect(workspaceConfiguration(coordination)).toBeUndefined();
    expect(codeOf(() => workspaceLocalAccess(coordination))).toBe('unavailable');
    expect(new Checkout(root, { stateHome }).inspect()).toBeUndefined();
    expect(namesIn(place.base)).toEqual(['workspaces']);
  });

  it('is made 0700 with its missing parents by acquire, and the lease works and releases', async () => {
    const { place, root, stateHome } = freshMachine();
    const coordination = openWorkspace(root, { stateHome });
    const lease = await acquireWorkspace(coordination, ANY_PORT, BOUND);
    for (const folder of [join(place.base, 'home'), join(place.base, 'home', 'local'), stateHome])
      expect(modeOf(folder)).toBe(0o700);
    expect(lease.registration.phase).toBe('idle');
    await lease.release();
    expect(inspectWorkspace(coordination)).toMatchObject({ status: 'stopped' });
  });

  it('is made by initialize, and by a plain tool taking the checkout lock', async () => {
    const first = freshMachine();
    await initializeWorkspace(openWorkspace(first.root, { stateHome: first.stateHome }), ANY_PORT);
    expect(modeOf(first.stateHome)).toBe(0o700);
    const second = freshMachine();
    const handle = await new Checkout(second.root, { stateHome: second.stateHome }).acquire();
    expect(modeOf(second.stateHome)).toBe(0o700);
    handle.release();
  });
});

describe('a state home that cannot be made', () => {
  /** A level above the state home in the way, and what inspect makes of it: a link to nothing is no state home yet. */
  const blocked = [
    {
      name: 'its parent is a file',
      make: (tmp: string) => writeFileSync(join(tmp, 'blocker'), 'not a folder'),
      inspect: 'unavailable',
    },
    {
      name: 'its parent is a link to nothing',
      make: (tmp: string) => symlinkSync(join(tmp, 'nowhere'), join(tmp, 'blocker')),
      inspect: 'absent',
    },
  ];

  it.each(blocked)(
    '$name: acquire and a plain tool are refused naming the state home; nothing is written',
    async ({ make, inspect }) => {
      const place = makePlace('coordination');
      const root = makeWorkspace(place, 'app');
      make(place.base);
      const stateHome = join(place.base, 'blocker', 'state');
      const coordination = openWorkspace(root, { stateHome });
      await expect(acquireWorkspace(coordination, ANY_PORT, BOUND)).rejects.toMatchObject({
        code: 'refused',
        path: stateHome,
      });
      expect(await codeOfAsync(new Checkout(root, { stateHome }).acquire())).toBe('refused');
      expect(inspectWorkspace(coordination).status).toBe(inspect);
      expect(namesIn(place.base)).toEqual(['blocker', 'workspaces']);
    },
  );
});
