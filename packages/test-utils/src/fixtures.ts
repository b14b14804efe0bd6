import { fileURLToPath } from 'node:url';
import { spawnChild, type SpawnedChild } from './child-process.js';

/**
 * The file URL of each package a shared fixture loads, by package name, as the
 * calling test resolves it (`import.meta.resolve('@leasehold/coordination')`):
 * test-utils may depend on contracts only, so a fixture never imports a layer by name.
 */
export type FixtureModules = Readonly<Record<string, string>>;

/** The plan of fixtures/checkout-holder.mjs: a plain tool holding `workspace`'s checkout lock, printing `{"held": token}`. */
export interface CheckoutHolderPlan {
  readonly workspace: string;
  readonly stateHome: string;
}

/** Each shared fixture (packages/test-utils/fixtures/<name>.mjs) with its plan. */
export interface SharedFixturePlans {
  readonly 'checkout-holder': CheckoutHolderPlan;
}

/** The absolute path of the shared fixture `name` (packages/test-utils/fixtures/<name>.mjs). */
export function sharedFixturePath(name: keyof SharedFixturePlans): string {
  return fileURLToPath(new URL(`../fixtures/${name}.mjs`, import.meta.url));
}

/** Spawns `node <fixture>.mjs '<plan as JSON>'`, the plan given `modules`; `cleanUp` kills it if it is still running. */
export function spawnSharedFixture<Name extends keyof SharedFixturePlans>(
  name: Name,
  plan: SharedFixturePlans[Name],
  modules: FixtureModules,
): SpawnedChild {
  return spawnChild(sharedFixturePath(name), [JSON.stringify({ ...plan, modules })]);
}
