import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { cleanUp, countsOf, messageOf, messagesOf, shownStep, spawnSharedFixture } from '@leasehold/test-utils';
import { ioErrorCodeOf } from '../test/crash-helpers.js';
import { FIXTURE_MODULES } from '../test/functional-helpers.js';
import {
  CASES,
  crasherPlan,
  judge,
  preparedPlace,
  reportedRaw,
  summary,
  type Judgement,
} from '../test/crash-safety.js';

afterEach(cleanUp);

// Crash safety (docs/persistence.md, "Crash safety", "I/O-error tests") for a process failing with an I/O error (EIO, ENOSPC) at any
// single mutating step of acquire, a phase change or release, then exiting
// (what is checked of each state: test/crash-safety.ts; the dry runs that
// prove each step list: crash-safety.test.ts). One test per point.

for (const operationCase of CASES)
  describe(`a writer failing with an I/O error at any mutating step, then exiting leaves it fenced: ${operationCase.name}`, () => {
    const judgements: Judgement[] = [];
    const outcomes: string[] = [];
    afterAll(() =>
      console.log(`${operationCase.name}: ${judgements.length} I/O-error points judged`, {
        outcomes: countsOf(outcomes),
        ...summary(judgements),
      }),
    );

    for (const [index, step] of operationCase.expectedSteps.entries())
      it(`${ioErrorCodeOf(step)} at step ${index + 1}: ${step}`, async () => {
        const steps = operationCase.expectedSteps;
        const failAt = index + 1;
        const failCode = ioErrorCodeOf(step);
        const label = `${operationCase.name}, ${failCode} at step ${failAt}: ${step}`;
        const prepared = await preparedPlace(operationCase);
        const child = spawnSharedFixture(
          'crasher',
          crasherPlan(operationCase.operation, prepared.place, prepared.root, { failAt, failCode }),
          FIXTURE_MODULES,
        );
        const failed = (await messageOf(child, 'failed')).failed as {
          outcome: string;
          code?: string;
          message?: string;
        };
        const end = await child.closed;
        expect(end, `${label}: ${end.stderr}`).toMatchObject({ code: 0, signal: null });
        // The same steps up to the failing one; after it, the rollback's or nothing.
        const reported = messagesOf(child, 'step').map((message) => shownStep(message, prepared.place, prepared.root));
        expect(reported.slice(0, failAt), label).toEqual(steps.slice(0, failAt));
        // The injected error itself is what the operation rejects with, unless the operation absorbs it.
        if (operationCase.absorbed.includes(step)) expect(failed, label).toEqual({ outcome: 'resolved' });
        else
          expect(failed, label).toMatchObject({
            outcome: 'rejected',
            code: failCode,
            message: `${failCode}: injected before ${reportedRaw(child, failAt)}`,
          });
        outcomes.push(`${failed.outcome}${failed.code === undefined ? '' : ` ${failed.code}`}`);
        judgements.push({
          ...(await judge(prepared, [...prepared.deadPids, child.pid], 'same root first', label)),
          order: 'same root first',
        });
      });
  });
