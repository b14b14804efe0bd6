import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  NAMESPACE_ENTRIES,
  PRIVATE_ROOT_ENTRIES,
  SERVICE_ENTRIES,
  stateHomeLayout,
  workspacePlaces,
} from '@leasehold/contracts';
import { bytesOf, cleanUp, codeOf, handPlaces, makePlace, sha256Hex } from '@leasehold/test-utils';
import { defaultStateHome, resolveWorkspace } from './index.js';

afterEach(cleanUp);

describe('resolveWorkspace', () => {
  it('gives the real path of a folder reached through a symbolic link', () => {
    const { base } = makePlace('coordination');
    const real = join(base, 'real', 'workspace');
    mkdirSync(real, { recursive: true });
    symlinkSync(join(base, 'real'), join(base, 'link'));
    expect(resolveWorkspace(join(base, 'link', 'workspace'))).toBe(real);
    expect(resolveWorkspace(`${real}/`)).toBe(real);
    expect(resolveWorkspace(real)).toBe(real);
  });

  it('refuses a missing path (its parent missing too) with a ContractError naming it, never a raw ENOENT', () => {
    const { base } = makePlace('coordination');
    const missing = join(base, 'no-such', 'workspace');
    expect(() => resolveWorkspace(missing)).toThrow(
      expect.objectContaining({
        name: 'ContractError',
        code: 'refused',
        path: missing,
        message: `${missing}: not an existing folder (ENOENT); pass the path of an existing workspace folder`,
      }),
    );
  });

  it('refuses a file, and a link to a file', () => {
    const { base } = makePlace('coordination');
    writeFileSync(join(base, 'file'), 'not a folder');
    symlinkSync(join(base, 'file'), join(base, 'file-link'));
    expect(() => resolveWorkspace(join(base, 'file'))).toThrow(
      `${join(base, 'file')}: not a folder; pass the path of an existing workspace folder`,
    );
    expect(codeOf(() => resolveWorkspace(join(base, 'file-link')))).toBe('refused');
  });

  it('refuses a dangling link', () => {
    const { base } = makePlace('coordination');
    symlinkSync(join(base, 'nowhere'), join(base, 'dangling'));
    expect(codeOf(() => resolveWorkspace(join(base, 'dangling')))).toBe('refused');
  });
});

describe('defaultStateHome', () => {
  it('takes LEASEHOLD_STATE_HOME first', () => {
    expect(defaultStateHome({ LEASEHOLD_STATE_HOME: '/srv/leasehold', XDG_STATE_HOME: '/xdg/state' })).toBe(
      '/srv/leasehold',
    );
  });

  it('refuses a LEASEHOLD_STATE_HOME that is relative or not normalised', () => {
    expect(codeOf(() => defaultStateHome({ LEASEHOLD_STATE_HOME: 'relative/state' }))).toBe('refused');
    expect(codeOf(() => defaultStateHome({ LEASEHOLD_STATE_HOME: '/srv/../leasehold' }))).toBe('refused');
    expect(codeOf(() => defaultStateHome({ LEASEHOLD_STATE_HOME: '/srv/leasehold/' }))).toBe('refused');
  });

  it('ignores an empty LEASEHOLD_STATE_HOME', () => {
    expect(defaultStateHome({ LEASEHOLD_STATE_HOME: '', XDG_STATE_HOME: '/xdg/state' })).toBe('/xdg/state/leasehold');
  });

  it('uses $XDG_STATE_HOME/leasehold next', () => {
    expect(defaultStateHome({ XDG_STATE_HOME: '/xdg/state' })).toBe('/xdg/state/leasehold');
  });

  it('ignores a relative XDG_STATE_HOME, as the XDG specification asks', () => {
    expect(defaultStateHome({ XDG_STATE_HOME: 'relative/state' })).toBe(
      join(homedir(), '.local', 'state', 'leasehold'),
    );
  });

  it('falls back to ~/.local/state/leasehold', () => {
    expect(defaultStateHome({})).toBe(join(homedir(), '.local', 'state', 'leasehold'));
    expect(defaultStateHome({ XDG_STATE_HOME: '' })).toBe(join(homedir(), '.local', 'state', 'leasehold'));
  });
});

describe('workspacePlaces', () => {
  it('puts the private root at the first 32 hex of sha256(root)', () => {
    const root = '/home/someone/project';
    const places = workspacePlaces(root, '/state');
    const hashed = sha256Hex(bytesOf(root)).slice(0, 32);
    expect(places.namespace).toBe('/state/v1');
    expect(places.workspaces).toBe('/state/v1/workspaces');
    expect(places.privateRoot).toBe(`/state/v1/workspaces/${hashed}`);
    expect(places.checkoutLock).toBe(`/state/v1/workspaces/${hashed}/checkout.lock`);
    expect(places.service).toBe(`/state/v1/workspaces/${hashed}/service`);
    expect(places.format).toBe(`${places.service}/format.json`);
    expect(places.config).toBe(`${places.service}/config.json`);
    expect(places.hostConfig).toBe(`${places.service}/host-config.json`);
    expect(places.registration).toBe(`${places.service}/registration.json`);
    expect(places.ownerLock).toBe(`${places.service}/owner.lock`);
    expect(places.capability).toBe(`${places.service}/local-capability.json`);
    expect(places.companion).toBe(`${places.service}/companion.json`);
  });

  it("spreads the state home's shared layout, the registry's own, and agrees with the paths computed by hand", () => {
    const root = '/home/someone/project';
    const places = workspacePlaces(root, '/state');
    const hand = handPlaces('/state', root);
    expect(places).toMatchObject(stateHomeLayout('/state'));
    expect(places).toMatchObject({
      stateHome: '/state',
      namespace: hand.namespace,
      staging: hand.staging,
      journal: hand.journal,
      registry: '/state/v1/registry',
      registryFormat: hand.registryFormat,
      roots: hand.roots,
      registryLock: hand.registryLock,
      workspaces: '/state/v1/workspaces',
      root,
      privateRoot: hand.privateRoot,
      checkoutLock: hand.checkoutLock,
      service: hand.service,
      format: hand.format,
      config: hand.config,
      registration: hand.registration,
      ownerLock: hand.ownerLock,
      capability: hand.capability,
      companion: hand.companion,
    });
  });

  it('gives two roots two private roots, even when one is a prefix of the other', () => {
    expect(workspacePlaces('/a/b', '/state').privateRoot).not.toBe(workspacePlaces('/a/bc', '/state').privateRoot);
  });

  it('refuses a relative or unnormalised root or state home', () => {
    expect(codeOf(() => workspacePlaces('relative', '/state'))).toBe('refused');
    expect(codeOf(() => workspacePlaces('/a/./b', '/state'))).toBe('refused');
    expect(codeOf(() => workspacePlaces('/a', 'state'))).toBe('refused');
    expect(codeOf(() => workspacePlaces('/a', '/state//home'))).toBe('refused');
  });

  it('names the allowed entries of docs/layout.md', () => {
    expect([...NAMESPACE_ENTRIES].sort()).toEqual(['journal', 'registry', 'workspaces']);
    expect([...PRIVATE_ROOT_ENTRIES].sort()).toEqual(['checkout.lock', 'service']);
    expect([...SERVICE_ENTRIES].sort()).toEqual(
      [
        'access-config.json',
        'access.json',
        'companion.json',
        'config.json',
        'format.json',
        'history',
        'host-config.json',
        'local-capability.json',
        'owner.lock',
        'registration.json',
      ].sort(),
    );
  });
});
