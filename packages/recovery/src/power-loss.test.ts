import { afterAll } from 'vitest';
import { cleanUp } from '@leasehold/test-utils';
import { PROTOCOLS } from '../test/power-loss.js';
import { powerLossTable } from '../test/power-loss-table.js';

// The power-loss exploration (docs/persistence.md, "Power-loss exploration"): a crash that loses the page cache (a power loss, a kernel
// crash) at any point of a protocol leaves only the states the persistence
// model of @leasehold/test-utils allows (its README states it). For every
// shipped protocol, a child records the trace of the one operation and
// exits; then, for every crash point and every state the model yields, this
// process writes the state at the same state-home path (documents name
// absolute paths) and checks crash safety (docs/persistence.md, "Crash safety") on it after the "reboot" (every
// holder is a dead process): recovery can read it, `inspect` never answers
// `absent` or `stopped` while a service fence remains, a new acquire is
// refused while one remains, a registry lock the crash left is taken over by
// a transaction of another workspace, `recover` with the current digest
// brings it to `stopped` and a fresh acquire succeeds, and no two registry
// rows overlap or share an endpoint; inside a recovery, that its journal
// record is durable before its first effect (docs/ownership.md, "The journal record"); and, after the last
// op, that what the call did is durable (docs/persistence.md, "What a returned call promises"). Then which of
// the trace's fsyncs the model needs (test/power-loss-fsyncs.ts), against
// the figures pinned in PROVED_FSYNCS. The harness is test/power-loss.ts,
// the table of tests test/power-loss-table.ts.
//
// The fresh acquire, whose trace is the longest, has a file of its own
// (power-loss-fresh.test.ts) so that it runs beside these.

// The recordings' folders live until the file ends (every test of a protocol writes its states there).
afterAll(cleanUp);

for (const protocol of PROTOCOLS) if (protocol.protocol !== 'acquire-fresh') powerLossTable(protocol);
