import { join } from 'node:path';
import { makeTemporaryFolder } from './temporary-folders.js';

/**
 * One test's temp folder `base` (resolved, 0700) and its state home `<base>/state`, which is not
 * created: the code under test makes it, and some tests check how. `base` is also the scratch
 * folder for `replaceFile`: outside the state home, on its file system.
 */
export interface TestPlace {
  readonly base: string;
  readonly stateHome: string;
}

/**
 * A fresh place, `leasehold-<label>-XXXXXX` under the system temp folder, removed by `cleanUp`.
 * Each package passes its own label, so a leftover folder tells whose test made it.
 */
export function makePlace(label: string): TestPlace {
  const base = makeTemporaryFolder(`leasehold-${label}-`);
  return { base, stateHome: join(base, 'state') };
}
