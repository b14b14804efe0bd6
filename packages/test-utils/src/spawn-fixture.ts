import { join } from 'node:path';
import { spawnChild, type SpawnedChild } from './child-process.js';

/**
 * The file URL of each package a fixture loads, by package name, as the calling test resolves it
 * (`import.meta.resolve('@leasehold/coordination')`): a fixture of test-utils, or one written to a
 * temp folder, cannot import a layer by name, and test-utils may depend on contracts only.
 */
export type FixtureModules = Readonly<Record<string, string>>;

/** Spawns `node <folder>/<fixture> ...args`: a fixture from a package's own fixtures folder; `cleanUp` kills it if it is still running. */
export function spawnFixture(folder: string, fixture: string, args: readonly string[]): SpawnedChild {
  return spawnChild(join(folder, fixture), args);
}

/**
 * Spawns `node <folder>/<fixture> '<plan as JSON>'`, the one argument every planned fixture takes
 * (the shared ones too); with `modules`, the plan carries them, for a fixture that imports the
 * packages from there.
 */
export function spawnPlanned(folder: string, fixture: string, plan: object, modules?: FixtureModules): SpawnedChild {
  return spawnFixture(folder, fixture, [JSON.stringify(modules === undefined ? plan : { ...plan, modules })]);
}
