import { afterAll } from 'vitest';
import { cleanUp } from '@leasehold/test-utils';
import { PROTOCOLS } from '../test/power-loss.js';
import { powerLossTable } from '../test/power-loss-table.js';

// The power-loss exploration (docs/persistence.md, "Power-loss exploration") for the fresh acquire (the rest: power-loss.test.ts, which says
// what is checked). Its own file: it makes the state home, so its trace is
// the longest, and it runs beside the other protocols'.

// The recording's folders live until the file ends (every test writes its states there).
afterAll(cleanUp);

powerLossTable(PROTOCOLS.find((each) => each.protocol === 'acquire-fresh')!);
