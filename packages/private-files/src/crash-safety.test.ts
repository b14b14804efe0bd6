import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { bytesOf, cleanUp, codeOf } from '@leasehold/test-utils';
import { makeRoot, namesIn, plainStep, spawnWriter, writerMessages, type WriterOperation } from '../test/helpers.js';
import { PrivateFiles, STAGING_FOLDER, type FileSnapshot, type MutationStep } from './index.js';

afterEach(cleanUp);

const OLD = 'old bytes, published by create';
const NEW = 'new bytes, published by replace: longer than the old ones';

type Start = 'fresh root' | 'staging folder exists';

/** What a read through PrivateFiles shows: absent, old, new, a torn content, or an error code. */
type Outcome = 'absent' | 'old' | 'new' | 'torn' | string;

const covered = { killed: 0, thrown: 0 };
afterAll(() => {
  console.log(`crash points covered: ${covered.killed} by SIGKILL in a child, ${covered.thrown} by a thrown error`);
});

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
  const staging =
    start === 'fresh root' ? [`create mkdir ${STAGING_FOLDER}`, 'create fsync-directory <root>'] : [];
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

/** What the target must be once the steps before the crash point (`done`) have run. */
function stateAfter(done: readonly MutationStep[]): Outcome {
  if (done.some((step) => step.operation === 'replace' && step.action === 'rename')) return 'new';
  if (done.some((step) => step.operation === 'create' && step.action === 'link')) return 'old';
  return 'absent';
}

/** True between create's link and its temp's unlink: the published file still has its staging link. */
function linkedButNotUnlinked(done: readonly MutationStep[]): boolean {
  const linked = done.some((step) => step.operation === 'create' && step.action === 'link');
  const unlinked = done.some((step) => step.operation === 'create' && step.action === 'unlink');
  return linked && !unlinked;
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

for (const start of ['fresh root', 'staging folder exists'] as const) {
  describe(`create then replace of one file, ${start}`, () => {
    it('a writer SIGKILLed before any single step leaves the file absent, old or new, whole, and nothing after sweepStaging', async () => {
      const dryRun = prepareRoot(start);
      const dry = spawnWriter({ root: dryRun.root, operations: operationsFor(dryRun.target) });
      expect((await dry.closed).code).toBe(0);
      const steps = writerMessages(dry, 'step') as MutationStep[];
      expect(describeSteps(steps, dryRun.root)).toEqual(expectedStepsFor(start));
      expect(steps).toHaveLength(start === 'fresh root' ? 11 : 9);
      expect(outcomeOf(new PrivateFiles(dryRun.root), dryRun.target)).toBe('new');

      const seen: Outcome[] = [];
      for (let crashAt = 1; crashAt <= steps.length; crashAt += 1) {
        const { root, folder, target } = prepareRoot(start);
        const writer = spawnWriter({ root, operations: operationsFor(target), stop: { how: 'kill', at: crashAt } });
        const end = await writer.closed;
        expect(end.signal).toBe('SIGKILL');
        const reached = writerMessages(writer, 'step') as MutationStep[];
        expect(describeSteps(reached, root)).toEqual(describeSteps(steps.slice(0, crashAt), dryRun.root));
        const done = reached.slice(0, crashAt - 1);
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
        seen.push(afterSweep);
        covered.killed += 1;
      }
      expect(new Set(seen)).toEqual(new Set(['absent', 'old', 'new']));
    });

    it('an error thrown from the hook before any single step is thrown by the call, leaving absent, old or new and no temp', () => {
      const dryRun = prepareRoot(start);
      const steps: MutationStep[] = [];
      const dryFiles = new PrivateFiles(dryRun.root, {
        hooks: { beforeMutation: (step) => steps.push(plainStep(step)) },
      });
      const created = dryFiles.create(dryRun.target, bytesOf(OLD));
      dryFiles.replace(dryRun.target, created, bytesOf(NEW));
      expect(describeSteps(steps, dryRun.root)).toEqual(expectedStepsFor(start));

      for (let failAt = 1; failAt <= steps.length; failAt += 1) {
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
        const done = reached.slice(0, failAt - 1);
        const outcome = outcomeOf(new PrivateFiles(root), target);
        expect({ failAt, outcome }).toEqual({ failAt, outcome: stateAfter(done) });
        // No sweep needed: the failing call removed its own temp.
        expectNoStrayFile(root, folder);
        covered.thrown += 1;
      }
    });
  });
}
