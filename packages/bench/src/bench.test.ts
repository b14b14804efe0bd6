import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// Runs the built benchmark once, quick, so that it cannot rot. It asserts the
// shape of what it prints and writes, never a timing: the machines are shared.

const BENCH = fileURLToPath(new URL('../dist/bench.js', import.meta.url));
const folder = mkdtempSync(join(tmpdir(), 'leasehold-bench-test-'));
const jsonPath = join(folder, 'results.json');

afterAll(() => rmSync(folder, { recursive: true, force: true }));

const SECTIONS = [
  '1. Floors',
  '2. private-files',
  '3. Ownership cycle',
  '4. Hot paths',
  '5. Scale',
  '6. Contention',
  '7. fsyncs per operation',
  '8. Readers under churn',
];

const ROWS = [
  'fsync of a newly written small file',
  'fsync of a folder after an entry changed',
  'bare durable create',
  'bare durable replace',
  'bare durable remove',
  'private-files create',
  'private-files replace',
  'private-files remove',
  'private-files read',
  'write-file-atomic writeFileSync, new file, + folder fsync',
  'readFileSync + SHA-256 of the bytes',
  'acquire + release, fresh workspace',
  'acquire + release, reused workspace',
  'proper-lockfile lockSync + unlockSync',
  'inspect() of a held workspace',
  'localAccess() of a held workspace',
  'proper-lockfile checkSync of a held lock',
  'connect() + one authenticated GET /v1/status',
  'bare node:http GET on loopback',
  'acquire + release, reused workspace, 63 other reservations',
  'acquire + release, reused workspace, 255 other reservations',
  'inspect(), 255 other reservations',
  '16 disjoint owners acquire + release at once, wall time',
  'the same 16 one at a time (sum)',
  'phase(stopping), reused workspace',
  'recover() of a dead owner',
  'registry transaction, nothing written',
  'registry transaction, a dead writer’s lock taken over',
  'inspect() of the untouched workspace answered stopped',
  'busy answers to the writers (acquire or release)',
];

const FIGURES = [
  'floor.fsync-file',
  'floor.fsync-folder',
  'floor.create',
  'floor.replace',
  'floor.remove',
  'files.create/floor',
  'files.create/write-file-atomic-durable',
  'files.create/write-file-atomic',
  'files.replace/floor',
  'files.replace/write-file-atomic-durable',
  'files.replace/write-file-atomic',
  'files.remove/floor',
  'files.read/read',
  'files.read/read-hash',
  'cycle.fresh/floor',
  'cycle.reused/floor',
  'cycle.reused/exact-floor',
  'cycle.reused/proper-lockfile',
  'inspect/proper-lockfile',
  'inspect/reads',
  'local-access/proper-lockfile',
  'local-access/reads',
  'connect/http-get',
  'scale.cycle.64',
  'scale.cycle.256',
  'scale.acquire.256',
  'scale.release.256',
  'scale.inspect.64',
  'scale.inspect.256',
  'contention/serial',
  'contention/cycle',
];

const FSYNC_COUNTS = [
  'files.create',
  'files.replace',
  'files.read',
  'files.remove',
  'acquire.fresh',
  'release.fresh',
  'acquire.reused',
  'phase',
  'release.reused',
  'recovery',
  'registry.transaction',
  'registry.takeover',
  'inspect',
  'local-access',
];

function runBench(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BENCH, '--quick', '--json', jsonPath], { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr });
    });
  });
}

const isNumber = (value: unknown): boolean => typeof value === 'number' && Number.isFinite(value);

describe('pnpm bench --quick', () => {
  it('runs, prints every row and writes every figure as JSON', async () => {
    const { code, stdout, stderr } = await runBench();
    expect(stderr).not.toMatch(/^bench: /m);
    expect(code).toBe(0);

    for (const section of SECTIONS) expect(stdout).toContain(section);
    for (const row of ROWS) expect(stdout).toContain(row);
    expect(stdout).toMatch(/Contention: busy answers \d+ of \d+/);
    expect(stdout).toMatch(/^Targets: \d+ of \d+ met; busy \d+ \((met|MISSED)\); readers [\d.]+ % stopped \((met|MISSED)\)\.$/m);

    const result = JSON.parse(readFileSync(jsonPath, 'utf8'));
    expect(result.schema).toBe('leasehold.bench/2');
    expect(result.settings.quick).toBe(true);
    const figures = new Map<string, Record<string, unknown>>(result.figures.map((figure: { id: string }) => [figure.id, figure]));
    expect([...figures.keys()].sort()).toEqual([...FIGURES].sort());
    for (const figure of figures.values()) {
      expect(isNumber(figure.median), `${figure.id} median`).toBe(true);
      expect(isNumber(figure.p99), `${figure.id} p99`).toBe(true);
      expect(isNumber(figure.ratio), `${figure.id} ratio`).toBe(true);
      expect(isNumber((figure.baseline as { median: unknown }).median), `${figure.id} baseline`).toBe(true);
    }
    expect(isNumber(result.contention.busy)).toBe(true);
    expect(result.contention.cycles).toBe(result.contention.processes * result.contention.trials);
    expect(figures.get('contention/serial')?.target).toBe(0.5);

    // Readers under churn: every read counted once, by what it answered; the writers really churned.
    const { availability } = result;
    expect(availability.writers).toBe(8);
    expect(availability.reads).toBe(result.settings.availabilityReads);
    const answered = Object.values(availability.answers as Record<string, number>).reduce((sum, count) => sum + count, 0);
    expect(answered).toBe(availability.reads);
    expect(availability.stopped).toBe(availability.answers.stopped ?? 0);
    expect(availability.cycles).toBeGreaterThanOrEqual(availability.writers);
    for (const key of ['busy', 'failed', 'churnMs']) expect(isNumber(availability[key]), key).toBe(true);
    expect(isNumber(availability.inspect.median)).toBe(true);

    const counts = new Map<string, Record<string, unknown>>(result.fsyncs.map((count: { id: string }) => [count.id, count]));
    expect([...counts.keys()].sort()).toEqual([...FSYNC_COUNTS].sort());
    for (const count of counts.values()) {
      for (const key of ['file', 'folder', 'total', 'publications', 'minimum']) expect(isNumber(count[key]), `${count.id} ${key}`).toBe(true);
      expect(count.minimum, `${count.id}`).toBe((count.total as number) - (count.avoidable as unknown[]).length);
    }
    // What follows a crash was really measured: recovery wrote, and the take-over replaced a dead writer's lock.
    expect(counts.get('recovery')?.total).toBeGreaterThan(0);
    expect((counts.get('registry.takeover')?.kinds as { replace: number }).replace).toBe(1);
    expect(result.machine.node).toBe(process.version);
  });
});
