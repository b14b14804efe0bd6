import { randomUUID } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encode, sha256, type OwnerConfig, type Reservation } from '@leasehold/contracts';
import { resolveWorkspace } from '@leasehold/coordination';
import { currentProcess } from '@leasehold/private-files';
import { Registry } from '@leasehold/registry';

/** A private temp folder (0700, real path) for one run, removed at the end. */
export class BenchPlace {
  readonly root: string;
  #names = 0;

  constructor(prefix = 'leasehold-bench-') {
    this.root = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
    chmodSync(this.root, 0o700);
  }

  /** `<root>/<segments>`, made (0700) with its missing parents. */
  folder(...segments: string[]): string {
    const path = join(this.root, ...segments);
    mkdirSync(path, { recursive: true, mode: 0o700 });
    return path;
  }

  /** A name never handed out before in this place. */
  unique(prefix: string): string {
    this.#names += 1;
    return `${prefix}-${this.#names}`;
  }

  /** A new real workspace folder under `<root>/workspaces`, resolved as coordination expects. */
  workspace(): string {
    return resolveWorkspace(this.folder('workspaces', this.unique('workspace')));
  }

  /** Removes the whole place. */
  remove(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}

/** A small document of the size Leasehold writes (an owner lock: about 230 bytes). */
export function documentBytes(): Uint8Array {
  const { pid, host } = currentProcess();
  return encode({ schema: 'leasehold.owner-lock/1', epoch: randomUUID(), token: randomUUID(), pid, host });
}

/** The owner config every measured workspace uses: any port on loopback. */
export const CONFIG: OwnerConfig = {
  schema: 'leasehold.owner-config/1',
  endpoint: 'http://127.0.0.1:0',
  policyIdentity: sha256(encode({ policy: 'leasehold-bench' })),
};

let nextPort = 40_000;

/** A concrete bound endpoint not handed out before in this process; nothing listens on it. */
export function boundEndpoint(): string {
  nextPort += 1;
  return `http://127.0.0.1:${nextPort}`;
}

/**
 * Adds `count` reservations of other (made-up, non-overlapping) roots to the
 * registry of `stateHome`, in one transaction, so that a measured workspace
 * meets a registry that already holds them. Their roots need not exist: a
 * row fences its place whether or not the folder is there (docs/layout.md,
 * "The registry table and its lock").
 */
export async function fillRegistry(stateHome: string, othersFolder: string, count: number): Promise<void> {
  if (count === 0) return;
  const owner = currentProcess();
  const configIdentity = sha256(encode(CONFIG));
  const others: Reservation[] = Array.from({ length: count }, (_, index) => ({
    root: join(othersFolder, `root-${index}`),
    stateHome,
    configIdentity,
    endpoint: `http://127.0.0.1:${20_000 + index}`,
    epoch: randomUUID(),
    pid: owner.pid,
    host: owner.host,
    ...(owner.processStart === undefined ? {} : { processStart: owner.processStart }),
    ownerToken: randomUUID(),
  }));
  const registry = new Registry(stateHome);
  for (const reservation of others) {
    await registry.transaction(reservation.root, (transaction) => transaction.reserve(reservation));
  }
}
