import { afterEach, describe, it } from 'vitest';
import { cleanUp } from '@leasehold/test-utils';
import { EXPLORATION_TIMEOUT_MS, PROTOCOLS } from '../test/power-loss.js';
import { exploreFsyncs } from '../test/power-loss-fsyncs.js';

afterEach(cleanUp);

// Issue 13: which fsyncs the fresh acquire needs (the method:
// test/power-loss-fsyncs.ts). Its own file: it makes the state home, so its
// trace is the longest and its exploration the slowest (minutes on two
// cores), and it runs beside the other protocols' (power-loss-fsyncs.test.ts).

describe('which fsyncs the power-loss model needs (issue 13): the fresh acquire', () => {
  const { name, protocol } = PROTOCOLS.find((each) => each.protocol === 'acquire-fresh')!;
  it(name, () => exploreFsyncs(protocol), EXPLORATION_TIMEOUT_MS);
});
