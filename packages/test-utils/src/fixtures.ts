import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { OwnerConfig } from '@leasehold/contracts';
import type { SpawnedChild } from './child-process.js';
import { spawnPlanned, type FixtureModules } from './spawn-fixture.js';

/** The folder of the shared fixtures, beside dist/ and src/. */
const SHARED_FIXTURES = fileURLToPath(new URL('../fixtures/', import.meta.url));

/** The plan of fixtures/checkout-holder.mjs: a plain tool holding `workspace`'s checkout lock, printing `{"held": token}`. */
export interface CheckoutHolderPlan {
  readonly workspace: string;
  readonly stateHome: string;
}

/** A mutating step as fixtures/crasher.mjs matches it: `path` omitted matches any path. */
export interface CrasherStep {
  readonly operation: string;
  readonly action: string;
  readonly path?: string;
}

/**
 * The plan of fixtures/crasher.mjs: one coordination operation (`acquire` counted from the start;
 * `phase` and `release` after an uncounted acquire) whose counted mutating steps are reported as
 * `{"step": ...}`, then `{"done": true, "steps": N}` or, with `failAt`, `{"failed": ..., "steps": N}`.
 */
export interface CrasherPlan {
  readonly workspace: string;
  readonly stateHome: string;
  readonly operation: 'acquire' | 'phase' | 'release';
  readonly config: OwnerConfig;
  readonly endpoint: string;
  readonly lockWaitMs?: number;
  /** The acquire's `replaceConfig` (an upgrade). */
  readonly replaceConfig?: boolean;
  /** Right after the acquire, uncounted: `lease.fenceProcess(companion)`, then `{"fenced": companion}`. */
  readonly companion?: number;
  /** SIGKILL before step k; `end`: after reporting done; `hold`: report done and `{"held": true}`, then stay alive. */
  readonly killAt?: number | 'end' | 'hold';
  /** SIGKILL before the first step of this operation and action (and this path, when given). */
  readonly killBefore?: CrasherStep;
  /** Throw an Error with code `failCode` from the hook at step k (once), report the outcome, exit 0. */
  readonly failAt?: number;
  readonly failCode?: string;
}

/** Each shared fixture (packages/test-utils/fixtures/<name>.mjs) with its plan. */
export interface SharedFixturePlans {
  readonly 'checkout-holder': CheckoutHolderPlan;
  readonly crasher: CrasherPlan;
}

/** The absolute path of the shared fixture `name` (packages/test-utils/fixtures/<name>.mjs). */
export function sharedFixturePath(name: keyof SharedFixturePlans): string {
  return join(SHARED_FIXTURES, `${name}.mjs`);
}

/** Spawns `node <fixture>.mjs '<plan as JSON>'`, the plan given `modules`; `cleanUp` kills it if it is still running. */
export function spawnSharedFixture<Name extends keyof SharedFixturePlans>(
  name: Name,
  plan: SharedFixturePlans[Name],
  modules: FixtureModules,
): SpawnedChild {
  return spawnPlanned(SHARED_FIXTURES, `${name}.mjs`, plan, modules);
}
