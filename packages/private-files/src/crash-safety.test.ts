import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { bytesOf, cleanUp, codeOf, countsOf } from '@leasehold/test-utils';
import { makeRoot, namesIn, plainStep, spawnWriter, writerMessages, type WriterOperation } from '../test/helpers.js';
import { PrivateFiles, STAGING_FOLDER, type FileSnapshot, type MutationStep } from './index.js';

afterEach(cleanUp);

const OLD = 'old bytes, published by create';
const NEW = 'new bytes, published by replace: longer than the old ones';

type Start = 'fresh root' | 'staging folder exists';

/** What a read through PrivateFiles shows: absent, old, new, a torn content, or an error code. */
type Outcome = string;

/** A root with the target folder `docs` and, when asked, an existing staging folder. */
function prepareRoot(start: Start): { root: string; folder: string; target: string } {
  const root = makeRoot();
  const files = new PrivateFiles(root);
  const folder = join(root, 'docs');
  files.directory(folder, true);
  if (start === 'staging folder exists') files.directory(join(root, STAGING_FOLDER), true);
  return { root, folder, target: join(folder, 'file') };
}

function operationsFor(target: string): WriterOperation[] {
  return [
    { op: 'create', path: target, text: OLD },
    { op: 'replace', path: target, text: NEW },
  ];
}

/** The steps of create then replace, as `operation action` with the path made relative to the root. */
function describeSteps(steps: readonly MutationStep[], root: string): string[] {
  return steps.map((step) => {
    const relative = step.path === root ? '<root>' : step.path.slice(root.length + 1);
    const shown = relative.startsWith(`${STAGING_FOLDER}/`) ? `${STAGING_FOLDER}/<temp>` : relative;
    return `${step.operation} ${step.action} ${shown}`;
  });
}

function expectedStepsFor(start: Start): string[] {
  const staging = start === 'fresh root' ? [`create mkdir ${STAGING_FOLDER}`, 'create fsync-directory <root>'] : [];
  return [
    ...staging,
    `create write ${STAGING_FOLDER}/<temp>`,
    `create fsync ${STAGING_FOLDER}/<temp>`,
    'create link docs/file',
    `create unlink ${STAGING_FOLDER}/<temp>`,
    'create fsync-directory docs',
    `replace write ${STAGING_FOLDER}/<temp>`,
    `replace fsync ${STAGING_FOLDER}/<temp>`,
    'replace rename docs/file',
    'replace fsync-directory docs',
  ];
}

/** Whether a step of this `operation action` is among the shown steps `done`. */
function didStep(done: readonly string[], operationAction: string): boolean {
  return done.some((step) => step.startsWith(`${operationAction} `));
}

/** What the target must be once the steps before the crash point (`done`, as shown) have run. */
function stateAfter(done: readonly string[]): Outcome {
  if (didStep(done, 'replace rename')) return 'new';
  if (didStep(done, 'create link')) return 'old';
  return 'absent';
}

/** True between create's link and its temp's unlink: the published file still has its staging link. */
function linkedButNotUnlinked(done: readonly string[]): boolean {
  return didStep(done, 'create link') && !didStep(done, 'create unlink');
}

function outcomeOf(files: PrivateFiles, target: string): Outcome {
  const result: { snapshot?: FileSnapshot | undefined } = {};
  const code = codeOf(() => {
    result.snapshot = files.read(target);
  });
  if (code !== 'no error') return code;
  if (result.snapshot === undefined) return 'absent';
  const text = Buffer.from(result.snapshot.bytes).toString();
  return text === OLD ? 'old' : text === NEW ? 'new' : 'torn';
}

/** The target folder holds nothing but the target; the staging folder is absent or empty. */
function expectNoStrayFile(root: string, folder: string): void {
  const names = readdirSync(folder);
  expect(names.filter((name) => name !== 'file')).toEqual([]);
  if (names.includes('file')) expect(lstatSync(join(folder, 'file')).nlink).toBe(1);
  expect(namesIn(join(root, STAGING_FOLDER)) ?? []).toEqual([]);
  expect(readdirSync(root).filter((name) => name !== STAGING_FOLDER && name !== 'docs')).toEqual([]);
}

/** Every crash point of a start: before step k, for k in 1..N. */
const crashPoints = (start: Start): number[] => expectedStepsFor(start).map((_, index) => index + 1);
const pointName = (start: Start, at: number) => `before step ${at}: ${expectedStepsFor(start)[at - 1]}`;

/** The dry run: create then replace in a child, every step reported; it must be exactly the list written above. */
async function dryRunInChild(start: Start): Promise<void> {
  const { root, target } = prepareRoot(start);
  const dry = spawnWriter({ root, operations: operationsFor(target) });
  expect((await dry.closed).code).toBe(0);
  const steps = writerMessages(dry, 'step') as MutationStep[];
  expect(describeSteps(steps, root)).toEqual(expectedStepsFor(start));
  expect(steps).toHaveLength(start === 'fresh root' ? 11 : 9);
  expect(outcomeOf(new PrivateFiles(root), target)).toBe('new');
}

/** A writer in a child, SIGKILLed before step `crashAt`; answers the outcome after sweepStaging. */
async function killedAt(start: Start, crashAt: number): Promise<Outcome> {
  const { root, folder, target } = prepareRoot(start);
  const writer = spawnWriter({ root, operations: operationsFor(target), stop: { how: 'kill', at: crashAt } });
  const end = await writer.closed;
  expect(end.signal).toBe('SIGKILL');
  const reached = writerMessages(writer, 'step') as MutationStep[];
  expect(describeSteps(reached, root)).toEqual(expectedStepsFor(start).slice(0, crashAt));
  const done = expectedStepsFor(start).slice(0, crashAt - 1);
  const expected = stateAfter(done);
  const files = new PrivateFiles(root);

  // Before the sweep: only a dead writer's second link makes the file refused.
  const beforeSweep = outcomeOf(files, target);
  expect({ crashAt, beforeSweep }).toEqual({
    crashAt,
    beforeSweep: linkedButNotUnlinked(done) ? 'refused' : expected,
  });

  files.sweepStaging();
  const afterSweep = outcomeOf(files, target);
  expect({ crashAt, afterSweep }).toEqual({ crashAt, afterSweep: expected });
  expectNoStrayFile(root, folder);
  return afterSweep;
}

/** The dry run in this process: the hook reports every step of create then replace, exactly the list written above. */
function dryRunThroughHook(start: Start): void {
  const dryRun = prepareRoot(start);
  const steps: MutationStep[] = [];
  const dryFiles = new PrivateFiles(dryRun.root, {
    hooks: { beforeMutation: (step) => steps.push(plainStep(step)) },
  });
  const created = dryFiles.create(dryRun.target, bytesOf(OLD));
  dryFiles.replace(dryRun.target, created, bytesOf(NEW));
  expect(describeSteps(steps, dryRun.root)).toEqual(expectedStepsFor(start));
}

/** Create then replace in this process, the hook throwing before step `failAt`; answers the outcome. */
function thrownAt(start: Start, failAt: number): Outcome {
  const { root, folder, target } = prepareRoot(start);
  const injected = new Error(`injected before step ${failAt}`);
  const reached: MutationStep[] = [];
  const files = new PrivateFiles(root, {
    hooks: {
      beforeMutation: (step) => {
        reached.push(plainStep(step));
        if (reached.length === failAt) throw injected;
      },
    },
  });
  let caught: unknown;
  try {
    const old = files.create(target, bytesOf(OLD));
    files.replace(target, old, bytesOf(NEW));
  } catch (error) {
    caught = error;
  }
  expect(caught).toBe(injected);
  // The same steps up to the failing one; after it, the clean-up's own (the temp's unlink) or nothing.
  expect(describeSteps(reached, root).slice(0, failAt)).toEqual(expectedStepsFor(start).slice(0, failAt));
  const done = expectedStepsFor(start).slice(0, failAt - 1);
  const outcome = outcomeOf(new PrivateFiles(root), target);
  expect({ failAt, outcome }).toEqual({ failAt, outcome: stateAfter(done) });
  // No sweep needed: the failing call removed its own temp.
  expectNoStrayFile(root, folder);
  return outcome;
}

// One test per crash point (each a fresh root, and for SIGKILL one child), so that each stays far inside its
// bound; the dry runs, which prove the step list every point relies on, are tests of their own.
for (const start of ['fresh root', 'staging folder exists'] as const) {
  describe(`create then replace of one file, ${start}`, () => {
    const killed: Outcome[] = [];
    const thrown: Outcome[] = [];
    afterAll(() => {
      console.log(
        `${start}: crash points covered: ${killed.length} by SIGKILL in a child, ${thrown.length} by a thrown error`,
        {
          killed: countsOf(killed),
          thrown: countsOf(thrown),
        },
      );
    });

    describe('a writer SIGKILLed before any single step leaves the file absent, old or new, whole, and nothing after sweepStaging', () => {
      it('the dry run reports exactly the steps written above, and leaves the new bytes', () => dryRunInChild(start));

      // Each point checks its own outcome against stateAfter; this checks that between them they reach all three.
      it('between them, the crash points leave the file absent, old and new', () => {
        const outcomes = crashPoints(start).map((at) => stateAfter(expectedStepsFor(start).slice(0, at - 1)));
        expect(new Set(outcomes)).toEqual(new Set(['absent', 'old', 'new']));
      });

      for (const crashAt of crashPoints(start)) {
        it(`killed ${pointName(start, crashAt)}`, async () => {
          killed.push(await killedAt(start, crashAt));
        });
      }
    });

    describe('an error thrown from the hook before any single step is thrown by the call, leaving absent, old or new and no temp', () => {
      it('the dry run reports exactly the steps written above', () => dryRunThroughHook(start));

      for (const failAt of crashPoints(start)) {
        it(`thrown ${pointName(start, failAt)}`, () => {
          thrown.push(thrownAt(start, failAt));
        });
      }
    });
  });
}
