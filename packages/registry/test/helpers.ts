import { randomUUID } from 'node:crypto';
import { chmodSync, lstatSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Reservation } from '@leasehold/contracts';
import { currentProcess } from '@leasehold/private-files';
import { isMissing, makeTemporaryFolder, sha256Hex, spawnChild, type SpawnedChild } from '@leasehold/test-utils';
import { Registry } from '../src/index.js';

/** The folder of the child-process scripts; they import the built package by its name. */
export const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

/** A state home path in a fresh temp folder (removed by `cleanUp`); the registry makes it (0700) on its first transaction. */
export function makeStateHome(): string {
  return join(makeTemporaryFolder('registry-'), 'state');
}

/** A registry on a fresh state home, initialised by one empty transaction. */
export async function initialised(): Promise<{ stateHome: string; registry: Registry }> {
  const stateHome = makeStateHome();
  const registry = new Registry(stateHome);
  await registry.transaction(() => undefined);
  return { stateHome, registry };
}

/** A valid 64-hex configIdentity, derived from a number so that entries differ. */
export function configIdentityOf(index: number): string {
  return sha256Hex(`config-${index}`);
}

/**
 * A valid reservation of `stateHome`, distinct per `index`: root
 * `/srv/workspace-<index>`, endpoint `http://127.0.0.1:<10000 + index>`, fresh
 * lowercase uuids, this host, this process's pid and processStart.
 */
export function reservation(stateHome: string, index: number, overrides: Partial<Reservation> = {}): Reservation {
  const me = currentProcess();
  return {
    root: `/srv/workspace-${index}`,
    stateHome,
    configIdentity: configIdentityOf(index),
    endpoint: `http://127.0.0.1:${10000 + index}`,
    epoch: randomUUID(),
    pid: me.pid,
    host: hostname(),
    ...(me.processStart === undefined ? {} : { processStart: me.processStart }),
    ownerToken: randomUUID(),
    ...overrides,
  };
}

/** `count` valid, mutually compatible reservations of `stateHome`. */
export function reservations(stateHome: string, count: number): Reservation[] {
  return Array.from({ length: count }, (_, index) => reservation(stateHome, index));
}

/**
 * Writes a file by hand, the way a corrupt or foreign state would be left:
 * replaces whatever is there, then makes it 0600 so that PrivateFiles judges
 * its content and not its mode.
 */
export function writePrivateFile(path: string, content: string | Uint8Array): void {
  rmSync(path, { force: true });
  writeFileSync(path, content, { mode: 0o600 });
  chmodSync(path, 0o600);
}

/** The bytes of a file, as a hex string (easy to compare), or undefined when it does not exist. */
export function bytesOf(path: string): string | undefined {
  try {
    return readFileSync(path).toString('hex');
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

/** The link count of the file at `path`. */
export function linksOf(path: string): number {
  return lstatSync(path).nlink;
}

/** This process's processStart; the lock tests need the Linux form. */
export function myProcessStart(): string {
  const start = currentProcess().processStart;
  if (start === undefined) throw new Error('no processStart on this platform');
  return start;
}

/** `processStart` with one of its fields (1 boot id, 2 PID namespace, 3 start time) changed to another valid value. */
export function withChangedField(processStart: string, field: 1 | 2 | 3): string {
  const fields = processStart.split(':');
  const value = fields[field];
  if (fields.length !== 4 || value === undefined) throw new Error('not a Linux processStart');
  fields[field] = field === 1 ? randomUUID() : String(BigInt(value) + 1n);
  return fields.join(':');
}

/** Spawns `node <fixture> ...args` from the fixtures folder; `cleanUp` kills it if it is still running. */
export function spawnFixture(fixture: string, args: readonly string[]): SpawnedChild {
  return spawnChild(join(FIXTURES, fixture), args);
}

/**
 * A child (`fixtures/holder.mjs hold`) that runs a transaction on `stateHome`
 * whose operation prints `holding` and then waits for a line on its stdin;
 * resolves once it holds the lock. `send('release')` lets it finish: it prints
 * `done` and exits 0.
 */
export async function spawnHolder(stateHome: string): Promise<SpawnedChild> {
  const child = spawnFixture('holder.mjs', ['hold', stateHome]);
  await child.line('holding');
  return child;
}
