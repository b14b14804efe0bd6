import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { cleanUp, messagesOf, shownStep, spawnSharedFixture } from '@leasehold/test-utils';
import { FIXTURE_MODULES } from '../test/functional-helpers.js';
import {
  CASES,
  crasherPlan,
  dryRun,
  judge,
  preparedPlace,
  summary,
  type Judgement,
  type OperationCase,
} from '../test/crash-safety.js';

afterEach(cleanUp);

// Crash safety (docs/persistence.md, "Crash safety") for a process killed (SIGKILL) before any single mutating step
// of acquire, a phase change or release (what is checked of each state:
// test/crash-safety.ts). The same with an I/O error: io-errors.test.ts.

/** Every crash point of a case: killed before step k, for k in 1..N, and once after the operation returned. */
const killPoints = (operationCase: OperationCase): (number | 'end')[] => [
  ...operationCase.expectedSteps.map((_, index) => index + 1),
  'end',
];
const pointName = (operationCase: OperationCase, killAt: number | 'end') =>
  killAt === 'end' ? 'after the last step' : `before step ${killAt}: ${operationCase.expectedSteps[killAt - 1]}`;

// One test per crash point (each a fresh place and one child), so that each stays far inside its bound; the
// dry run, which proves the step list every point relies on, is a test of its own.
for (const operationCase of CASES)
  describe(`a writer killed (SIGKILL) before any mutating step leaves it fenced: ${operationCase.name}`, () => {
    const judgements: Judgement[] = [];
    afterAll(() =>
      console.log(`${operationCase.name}: ${judgements.length} SIGKILL crash points judged`, summary(judgements)),
    );

    it('the dry run reports exactly the steps written from docs/ownership.md and docs/persistence.md', () =>
      dryRun(operationCase));

    for (const killAt of killPoints(operationCase))
      it(`killed ${pointName(operationCase, killAt)}`, async () => {
        const steps = operationCase.expectedSteps;
        const prepared = await preparedPlace(operationCase);
        const child = spawnSharedFixture(
          'crasher',
          crasherPlan(operationCase.operation, prepared.place, prepared.root, { killAt }),
          FIXTURE_MODULES,
        );
        const end = await child.closed;
        expect(end, `killed at ${killAt}: ${end.stderr}`).toMatchObject({ code: null, signal: 'SIGKILL' });
        const reported = messagesOf(child, 'step').map((message) => shownStep(message, prepared.place, prepared.root));
        expect(reported).toEqual(killAt === 'end' ? steps : steps.slice(0, killAt));
        expect(messagesOf(child, 'done')).toHaveLength(killAt === 'end' ? 1 : 0);
        const label = `${operationCase.name}, killed ${pointName(operationCase, killAt)}`;
        // Alternately the same root's writer or another workspace's meets what the dead writer left first.
        const order = killAt === 'end' || killAt % 2 === 1 ? 'same root first' : 'other first';
        judgements.push({ ...(await judge(prepared, [...prepared.deadPids, child.pid], order, label)), order });
      });
  });
