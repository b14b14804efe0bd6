import { afterEach, describe, it } from 'vitest';
import { cleanUp } from '@leasehold/test-utils';
import { EXPLORATION_TIMEOUT_MS, PROTOCOLS } from '../test/power-loss.js';
import { exploreFsyncs } from '../test/power-loss-fsyncs.js';

afterEach(cleanUp);

// Issue 13: which fsyncs the power-loss model needs (the method:
// test/power-loss-fsyncs.ts), for every protocol but the fresh acquire,
// which has a file of its own (power-loss-fsyncs-fresh.test.ts) so that its
// longer exploration runs beside these.

describe('which fsyncs the power-loss model needs (issue 13)', () => {
  for (const { name, protocol } of PROTOCOLS) if (protocol !== 'acquire-fresh') it(name, () => exploreFsyncs(protocol), EXPLORATION_TIMEOUT_MS);
});
