import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { encode, type OwnerConfig, type Reservation } from '@leasehold/contracts';
import { currentProcess, ownerStatus, type ProcessIdentity } from '@leasehold/private-files';
import { Registry } from '@leasehold/registry';
import {
  bytesOf,
  codeOfAsync,
  processStartWith,
  replaceFile,
  sha256Hex,
  treeOf,
  type FixtureModules,
  type TestPlace,
  type TreeEntry,
} from '@leasehold/test-utils';
import { expect } from 'vitest';
import { openWorkspace, resolveWorkspace, type Workspace } from '../src/index.js';

/** What the shared fixtures of @leasehold/test-utils load: the built package, resolved here (test-utils may not depend on it). */
export const FIXTURE_MODULES: FixtureModules = {
  '@leasehold/coordination': import.meta.resolve('@leasehold/coordination'),
};

/** A real workspace folder `<base>/workspaces/<name>` (made with its parents), passed through `resolveWorkspace`. */
export function makeWorkspace(place: TestPlace, name: string): string {
  const folder = join(place.base, 'workspaces', name);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  return resolveWorkspace(folder);
}

/** A coordination for a new workspace folder `name` in the place's state home. */
export function coordinationFor(place: TestPlace, name: string): Workspace {
  return openWorkspace(makeWorkspace(place, name), { stateHome: place.stateHome });
}

/** Policy bytes for a label: the content of a host-config.json. */
export function policyBytes(label = 'policy'): Uint8Array {
  return bytesOf(`{"policy":"${label}"}`);
}

/** A valid owner config for `endpoint` (any-port form allowed), naming the policy of `label`. */
export function configFor(endpoint = 'http://127.0.0.1:0', label = 'policy'): OwnerConfig {
  return { schema: 'leasehold.owner-config/1', endpoint, policyIdentity: sha256Hex(policyBytes(label)) };
}

/** The any-port config most tests use. */
export const ANY_PORT = configFor();
/** A concrete bound endpoint; no socket needs to listen on it. */
export const BOUND = 'http://127.0.0.1:40001';

/** The parsed JSON document at `path`. */
export function readJson(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
}

/** A valid reservation for `root` in `stateHome` (another, made-up owner). */
export function reservationFor(stateHome: string, root: string, endpoint: string): Reservation {
  const owner = currentProcess();
  return {
    root,
    stateHome,
    configIdentity: sha256Hex(root),
    endpoint,
    epoch: randomUUID(),
    pid: owner.pid,
    host: owner.host,
    ownerToken: randomUUID(),
  };
}

/** The registry paths of a state home. */
export function registryPaths(stateHome: string): { folder: string; format: string; roots: string; lock: string } {
  const folder = join(stateHome, 'v1', 'registry');
  return {
    folder,
    format: join(folder, 'format.json'),
    roots: join(folder, 'roots.json'),
    lock: join(folder, 'registry.lock'),
  };
}

/** The reservations in roots.json, read directly. */
export function registryRows(stateHome: string): Reservation[] {
  return readJson(registryPaths(stateHome).roots).entries as Reservation[];
}

/**
 * Writes `roots.json` by hand with exactly `rows` (canonical bytes, a new inode), after one empty
 * registry transaction has made the registry if there was none.
 */
export async function writeRows(place: TestPlace, rows: readonly Reservation[]): Promise<void> {
  const paths = registryPaths(place.stateHome);
  if (!existsSync(paths.roots)) await new Registry(place.stateHome).transaction(place.base, () => undefined);
  replaceFile(place.base, paths.roots, encode({ schema: 'leasehold.registry/1', entries: rows }));
}

/** A holder that is proved gone: this pid as it was on another boot (`ownerStatus` says `absent`). */
export function goneHolder(): ProcessIdentity {
  const holder = {
    ...currentProcess(),
    processStart: processStartWith(currentProcess().processStart, 'bootId', randomUUID()),
  };
  expect(ownerStatus(holder.pid, holder.host, holder.processStart)).toBe('absent');
  return holder;
}

/** Holders that cannot be told from here (`ambiguous`): one on another host, one in another PID namespace. */
export function ambiguousHolders(): { readonly name: string; readonly holder: ProcessIdentity }[] {
  const holders: { readonly name: string; readonly holder: ProcessIdentity }[] = [
    { name: 'another host', holder: { pid: 1, host: 'another-host' } },
    {
      name: 'another PID namespace',
      holder: {
        ...currentProcess(),
        processStart: processStartWith(currentProcess().processStart, 'pidNamespace', '1'),
      },
    },
  ];
  for (const { holder } of holders) expect(ownerStatus(holder.pid, holder.host, holder.processStart)).toBe('ambiguous');
  return holders;
}

/** The bytes of a `registry.lock` held by `holder` for a transaction of `root`. */
export function registryLockBytes(holder: ProcessIdentity, root: string): Uint8Array {
  return encode({ schema: 'leasehold.registry-lock/1', token: randomUUID(), ...holder, root });
}

/** `treeOf` of `root` without a folder's size and times; its inode, mode, owner, link count and names still show. */
export function stateTreeOf(root: string): Record<string, TreeEntry> {
  // A refused registry transaction still creates and removes `registry.lock` (and its staging temp)
  // inside folders, and that the lock is gone again is what the listing of names proves.
  return treeOf(root, { folderTimes: false });
}

/** Runs `action` and asserts that nothing under `root` changed; gives the code it threw. */
export async function unchangedCodeOf(root: string, action: () => Promise<unknown>): Promise<string> {
  const before = stateTreeOf(root);
  const code = await codeOfAsync(action);
  expect(stateTreeOf(root)).toEqual(before);
  return code;
}
