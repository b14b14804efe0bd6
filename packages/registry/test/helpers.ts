import { randomUUID } from 'node:crypto';
import { chmodSync, lstatSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stateHomeLayout, type RegistryLock, type Reservation } from '@leasehold/contracts';
import { currentProcess } from '@leasehold/private-files';
import {
  codeOfAsync,
  isMissing,
  makeTemporaryFolder,
  messagesOf,
  namesIn,
  sha256Hex,
  shownStep,
  spawnFixture,
  spawnPlanned,
  type SpawnedChild,
} from '@leasehold/test-utils';
import { Registry } from '../src/index.js';

/** The folder of the child-process scripts; they import the built package by its name. */
export const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));

/** A state home path in a fresh temp folder (removed by `cleanUp`); the registry makes it (0700) on its first transaction. */
export function makeStateHome(): string {
  return join(makeTemporaryFolder('registry-'), 'state');
}

/** The root the tests' own bookkeeping transactions are for (any absolute path: a transaction only names it in the lock). */
export const TEST_ROOT = '/srv/test';

/** A registry on a fresh state home, initialised by one empty transaction. */
export async function initialised(): Promise<{ stateHome: string; registry: Registry }> {
  const stateHome = makeStateHome();
  const registry = new Registry(stateHome);
  await registry.transaction(TEST_ROOT, () => undefined);
  return { stateHome, registry };
}

/** Reserves `rows` one by one, each in its own transaction (the way owners come). */
export async function reserveAll(registry: Registry, rows: readonly Reservation[]): Promise<void> {
  for (const row of rows) await registry.transaction(row.root, (transaction) => transaction.reserve(row));
}

/** A valid 64-hex configIdentity, derived from a number so that entries differ. */
function configIdentityOf(index: number): string {
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

/**
 * A child (`fixtures/holder.mjs hold`) that runs a transaction for `root` on
 * `stateHome` whose operation prints `holding` and then waits for a line on
 * its stdin; resolves once it holds the lock. `send('release')` lets it
 * finish: it prints `done` and exits 0.
 */
export async function spawnHolder(stateHome: string, root = '/srv/holder'): Promise<SpawnedChild> {
  const child = spawnFixture(FIXTURES, 'holder.mjs', ['hold', stateHome, root]);
  await child.line('holding');
  return child;
}

/** The plan of `fixtures/transactor.mjs`: one transaction for `root`, and what its hook does. */
export interface TransactorPlan {
  readonly stateHome: string;
  readonly root: string;
  /** The operation reserves this row. */
  readonly reserve?: Reservation;
  /** The operation removes this row. */
  readonly unreserve?: { readonly root: string; readonly epoch: string };
  /** The operation prints {"holding":true} and waits for a line on stdin. */
  readonly hold?: boolean;
  /** The operation makes this file exclusively (O_EXCL) on entry and removes it on leaving; EEXIST prints {"overlap":true}. */
  readonly critical?: string;
  readonly lockWaitMs?: number;
  /** Print {"ready":true}, then wait for a line on stdin before the transaction starts. */
  readonly waitForGo?: boolean;
  /** SIGKILL itself before the n-th mutating step (1-based). */
  readonly killAt?: number;
  /** Pause (print {"paused":step}, wait for a line) before the first step whose `<operation> <action> <path>` matches each regex in turn. */
  readonly pauseAt?: readonly string[];
  /** Throw an Error with code EIO before the step whose `<operation> <action> <path>` is exactly this. */
  readonly failAt?: string;
}

/** Spawns `fixtures/transactor.mjs` with `plan`; `cleanUp` kills it if it is still running. */
export function spawnTransactor(plan: TransactorPlan): SpawnedChild {
  return spawnPlanned(FIXTURES, 'transactor.mjs', plan);
}

/**
 * The steps a transactor printed, shown relative to the test folder (the
 * state home's parent) with `<temp>` for staged files, and each take-over
 * marker named by `tokens` (token to a name such as `<dead>`).
 */
export function shownSteps(
  child: SpawnedChild,
  stateHome: string,
  tokens: Readonly<Record<string, string>> = {},
): string[] {
  return messagesOf(child, 'step').map((message) =>
    shownPath(shownStep(message, { base: dirname(stateHome), stateHome }, TEST_ROOT), tokens),
  );
}

/** A path (or a shown step) with every take-over marker's token replaced by its name in `tokens`. */
export function shownPath(text: string, tokens: Readonly<Record<string, string>>): string {
  return Object.entries(tokens).reduce(
    (shown, [token, name]) => shown.replaceAll(`takeover-${token}.lock`, `takeover-${name}.lock`),
    text,
  );
}

/** The lock (or marker) at `path`, parsed by hand; undefined when there is none. */
export function lockAt(path: string): RegistryLock | undefined {
  const bytes = bytesOf(path);
  return bytes === undefined ? undefined : (JSON.parse(Buffer.from(bytes, 'hex').toString('utf8')) as RegistryLock);
}

/** The take-over markers in the registry folder of `stateHome`, by name. */
export function markersIn(stateHome: string): string[] {
  return namesIn(stateHomeLayout(stateHome).registry).filter((name) => name.startsWith('takeover-'));
}

/** A lock document for this host (fields overridable), as a dead or foreign writer would have left it. */
export function lockDocument(fields: Partial<RegistryLock> = {}): RegistryLock {
  return {
    schema: 'leasehold.registry-lock/1',
    token: randomUUID(),
    pid: process.pid,
    host: hostname(),
    processStart: myProcessStart(),
    root: '/srv/elsewhere',
    ...fields,
  };
}

/** The code a transaction of `root` fails with, and whether its operation ever ran (it must not, when refused). */
export async function failedTransaction(registry: Registry, root: string): Promise<{ code: string; ran: boolean }> {
  let ran = false;
  const code = await codeOfAsync(
    registry.transaction(root, () => {
      ran = true;
    }),
  );
  return { code, ran };
}
