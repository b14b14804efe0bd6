import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ContractError,
  DOCUMENT_BYTES,
  PATHS_DOCUMENT_BYTES,
  REGISTRY_BYTES,
  checkoutLockSchema,
  decodeBytes,
  localCapabilitySchema,
  ownerConfigSchema,
  ownerLockSchema,
  registrationSchema,
  registryFormatSchema,
  registryLockSchema,
  reservationTableSchema,
  serviceFormatSchema,
  type OwnerConfig,
} from '@leasehold/contracts';
import {
  handPlaces,
  loopbackEndpoint,
  listingOutsideStaging,
  makeWorkspace,
  namesIn,
  sha256Hex,
  spawnPlanned,
  type SpawnedChild,
  type TestPlace,
} from '@leasehold/test-utils';

/** The folder of the child-process scripts; they import the built packages by name. */
export const PROCESS_FIXTURES = fileURLToPath(new URL('./process-fixtures/', import.meta.url));

/** The one config every process test uses: any port on 127.0.0.1. */
export const OWNER_CONFIG: OwnerConfig = {
  schema: 'leasehold.owner-config/1',
  endpoint: 'http://127.0.0.1:0',
  policyIdentity: sha256Hex('leasehold process tests: policy'),
};

/** The plan of `process-fixtures/stepper.mjs`: a writer stopped (killed or paused) at one step. */
export interface StepperPlan {
  readonly workspace: string;
  readonly stateHome: string;
  readonly config: OwnerConfig;
  readonly endpoint: string;
  readonly lockWaitMs?: number;
  /** Which operation's steps are watched. */
  readonly during: 'acquire' | 'release';
  /** The step to stop at, `<operation> <action> <absolute path>` (see `stepAt`). */
  readonly at: string;
  /** Stop at the step after `at` instead (a step whose path is a staged temp, say); a number: that many steps after it. */
  readonly after?: boolean | number;
  readonly then: 'kill' | 'pause';
}

/** A step as `StepperPlan.at` names it. */
export function stepAt(operation: string, action: string, path: string): string {
  return `${operation} ${action} ${path}`;
}

/** The names in the namespace's staging folder (by hand); empty when it does not exist. */
export function stagingLeftovers(stateHome: string): string[] {
  return namesIn(handPlaces(stateHome, '/').staging);
}

// Relative path below the namespace -> schema and bound of the document that lives there.
const DOCUMENTS: readonly {
  readonly pattern: RegExp;
  readonly schema: Parameters<typeof decodeBytes>[0];
  readonly maxBytes: number;
}[] = [
  { pattern: /^registry\/format\.json$/, schema: registryFormatSchema, maxBytes: DOCUMENT_BYTES },
  { pattern: /^registry\/roots\.json$/, schema: reservationTableSchema, maxBytes: REGISTRY_BYTES },
  { pattern: /^registry\/registry\.lock$/, schema: registryLockSchema, maxBytes: DOCUMENT_BYTES },
  // A take-over marker holds the lock document of the writer taking a dead holder's lock over.
  { pattern: /^registry\/takeover-[0-9a-f-]{36}\.lock$/, schema: registryLockSchema, maxBytes: DOCUMENT_BYTES },
  { pattern: /^workspaces\/[0-9a-f]{32}\/checkout\.lock$/, schema: checkoutLockSchema, maxBytes: DOCUMENT_BYTES },
  {
    pattern: /^workspaces\/[0-9a-f]{32}\/service\/format\.json$/,
    schema: serviceFormatSchema,
    maxBytes: PATHS_DOCUMENT_BYTES,
  },
  { pattern: /^workspaces\/[0-9a-f]{32}\/service\/config\.json$/, schema: ownerConfigSchema, maxBytes: DOCUMENT_BYTES },
  {
    pattern: /^workspaces\/[0-9a-f]{32}\/service\/registration\.json$/,
    schema: registrationSchema,
    maxBytes: PATHS_DOCUMENT_BYTES,
  },
  { pattern: /^workspaces\/[0-9a-f]{32}\/service\/owner\.lock$/, schema: ownerLockSchema, maxBytes: DOCUMENT_BYTES },
  {
    pattern: /^workspaces\/[0-9a-f]{32}\/service\/local-capability\.json$/,
    schema: localCapabilitySchema,
    maxBytes: DOCUMENT_BYTES,
  },
];

/**
 * Every file below the state home (outside the staging folder) that does not
 * decode strictly with the contracts schema of its place, or that has no
 * place at all: `<relative path>: <why>`. Empty when every file decodes.
 */
export function undecodableFiles(stateHome: string): string[] {
  const problems: string[] = [];
  const namespace = handPlaces(stateHome, '/').namespace;
  for (const [relative, entry] of Object.entries(listingOutsideStaging(stateHome))) {
    if (entry.kind === 'folder') continue;
    const inNamespace = relative.startsWith('v1/') ? relative.slice(3) : undefined;
    const document = DOCUMENTS.find((candidate) => inNamespace !== undefined && candidate.pattern.test(inNamespace));
    if (document === undefined) {
      problems.push(`${relative}: not a Leasehold file`);
      continue;
    }
    try {
      decodeBytes(document.schema, readFileSync(join(namespace, inNamespace!)), document.maxBytes, relative);
    } catch (error) {
      problems.push(`${relative}: ${ContractError.is(error) ? error.code : 'unreadable'}`);
    }
  }
  return problems;
}

/** The plan of `test/process-fixtures/cycler.mjs`. */
interface CyclerPlan {
  readonly workspace: string;
  readonly stateHome: string;
  readonly config: OwnerConfig;
  readonly endpoint: string;
  readonly iterations: number;
  readonly lockWaitMs: number;
}

/**
 * `count` cyclers, each acquiring and releasing its own workspace `<prefix>-<i>` of `place`
 * `iterations` times on `loopbackEndpoint(firstPort + i)`, once told `go`. Their lock wait is generous,
 * so that a writer never gives up (`busy`) however slow the disk is.
 */
export function spawnCyclers(
  place: TestPlace,
  count: number,
  prefix: string,
  firstPort: number,
  iterations: number,
): SpawnedChild[] {
  return Array.from({ length: count }, (_, index) => {
    const plan: CyclerPlan = {
      workspace: makeWorkspace(place, `${prefix}-${index}`),
      stateHome: place.stateHome,
      config: OWNER_CONFIG,
      endpoint: loopbackEndpoint(firstPort + index),
      iterations,
      lockWaitMs: 60_000,
    };
    return spawnPlanned(PROCESS_FIXTURES, 'cycler.mjs', plan);
  });
}

/**
 * An owner in another process (process-fixtures/stepped-owner.mjs) that acquires `root` at once on
 * `loopbackEndpoint(port)` and moves a step at each `send`: `stopping`, then `release`.
 */
export function steppedOwner(place: TestPlace, root: string, port: number): SpawnedChild {
  return spawnPlanned(PROCESS_FIXTURES, 'stepped-owner.mjs', {
    workspace: root,
    stateHome: place.stateHome,
    config: OWNER_CONFIG,
    endpoint: loopbackEndpoint(port),
    lockWaitMs: 60_000,
  });
}
