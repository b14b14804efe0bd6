import { writeFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

/** Where each package's run writes its times, read by `tooling/scripts/test-times.mjs` after `pnpm test`. */
const TEST_TIMES_FILE = '.test-times.json';

/** One test's time against the bound it ran under. */
interface TimedTest {
  readonly file: string;
  readonly name: string;
  readonly state: string;
  readonly durationMs: number;
  readonly timeoutMs: number;
}

/**
 * Records, for one package's run, its wall time and every test's duration
 * and time bound, so that the next slow test is seen (by the times script)
 * long before it reaches its bound and fails CI on a busier day.
 */
export class TestTimesReporter implements Reporter {
  private started = performance.now();

  onTestRunStart(): void {
    this.started = performance.now();
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const wallMs = performance.now() - this.started;
    const root = testModules[0]?.project.config.root ?? process.cwd();
    const tests = testModules.flatMap((testModule) =>
      [...testModule.children.allTests()].map((testCase): TimedTest => {
        // The bound a test ran under is its own (`it(name, fn, ms)`) or the project's; vitest keeps it on the task only.
        const task = (testCase as unknown as { task?: { timeout?: number } }).task;
        return {
          file: relative(root, testModule.moduleId),
          name: testCase.fullName,
          state: testCase.result().state,
          durationMs: testCase.diagnostic()?.duration ?? 0,
          timeoutMs: task?.timeout ?? testCase.project.config.testTimeout,
        };
      }),
    );
    writeFileSync(
      join(root, TEST_TIMES_FILE),
      `${JSON.stringify({ package: basename(root), wallMs, tests }, null, 1)}\n`,
    );
  }
}
