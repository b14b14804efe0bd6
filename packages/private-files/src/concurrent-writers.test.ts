import { existsSync, linkSync, lstatSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  bytesOf,
  cleanUp,
  codeOf,
  isMessage,
  killAndReap,
  spawnFixture,
  type SpawnedChild,
} from '@leasehold/test-utils';
import {
  FIXTURES,
  makeRoot,
  namesIn,
  plainStep,
  spawnWriter,
  unchangedCodeOf,
  writerMessages,
} from '../test/helpers.js';
import {
  PrivateFiles,
  STAGING_FOLDER,
  currentProcess,
  ownerStatus,
  type FileSnapshot,
  type MutationStep,
} from './index.js';
import { stagingName } from './staging-name.js';

afterEach(cleanUp);

const MAX_RACE_READS = 20_000;
const MAX_PUBLISHED_READS = 40_000;

/** Counts one unexpected outcome (an error code, a torn read) by its kind. */
function tallyOne(tally: Record<string, number>, kind: string): void {
  tally[kind] = (tally[kind] ?? 0) + 1;
}

/** The step a paused or killed writer stopped at, from its last `step` line. */
function lastStep(child: SpawnedChild): MutationStep {
  const steps = writerMessages(child, 'step') as MutationStep[];
  const last = steps.at(-1);
  if (last === undefined) throw new Error('the writer reported no step');
  return last;
}

/** The identity a fixture process prints of itself. */
async function identityOfChild(): Promise<{ pid: number; host: string; processStart?: string }> {
  const child = spawnFixture(FIXTURES, 'identity.mjs', []);
  const line = await child.line(() => true);
  const end = await child.closed;
  expect(end.code).toBe(0);
  return JSON.parse(line) as { pid: number; host: string; processStart?: string };
}

describe('a reader racing a writer', () => {
  it('reads a file replaced while it is read as conflict, never refused, and never a torn content', async () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const target = join(root, 'raced');
    const first = 'a'.repeat(4096);
    const second = 'b'.repeat(6000);
    files.create(target, bytesOf(first));
    const replacer = spawnFixture(FIXTURES, 'replacer.mjs', [join(root, STAGING_FOLDER), target, first, second]);
    await replacer.line((line) => line === 'ready');

    const outcomes = { read: 0, conflict: 0, other: {} as Record<string, number> };
    for (let count = 0; count < MAX_RACE_READS && outcomes.conflict < 25; count += 1) {
      const result: { snapshot?: FileSnapshot | undefined } = {};
      const code = codeOf(() => {
        result.snapshot = files.read(target);
      });
      if (code !== 'no error') {
        if (code === 'conflict') outcomes.conflict += 1;
        else tallyOne(outcomes.other, code);
        continue;
      }
      const snapshot = result.snapshot;
      const text = snapshot === undefined ? 'absent' : Buffer.from(snapshot.bytes).toString();
      if (text === first || text === second) outcomes.read += 1;
      else tallyOne(outcomes.other, `torn read of ${text.length} bytes`);
    }
    await killAndReap(replacer);
    console.log(`replaced while read: ${outcomes.read} whole reads, ${outcomes.conflict} conflicts`);
    expect(outcomes.other).toEqual({});
    expect(outcomes.conflict).toBeGreaterThan(0);
    expect(outcomes.read).toBeGreaterThan(0);
  });

  it('reads a file a live writer has linked but not yet unlinked from staging as conflict; once the writer is killed, refused; after sweepStaging, the new bytes', async () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    files.directory(join(root, STAGING_FOLDER), true);
    const target = join(root, 'published');
    const writer = spawnWriter({
      root,
      operations: [{ op: 'create', path: target, text: 'published by the writer' }],
      stop: { how: 'pause', action: 'unlink', operation: 'create' },
    });
    await writer.line(isMessage('paused'));
    const temp = lastStep(writer).path;
    expect(temp.startsWith(join(root, STAGING_FOLDER) + '/')).toBe(true);
    expect(lstatSync(target).nlink).toBe(2);
    expect(lstatSync(temp).ino).toBe(lstatSync(target).ino);

    expect(unchangedCodeOf(root, () => files.read(target))).toBe('conflict');
    expect(unchangedCodeOf(root, () => files.assert(target, undefined))).toBe('conflict');
    // The writer is live: its temp is kept.
    let sweep = files.sweepStaging();
    expect(sweep).toEqual({ removed: [], kept: [basename(temp)] });
    expect(existsSync(temp)).toBe(true);

    const end = await killAndReap(writer);
    expect(end.signal).toBe('SIGKILL');
    // A dead writer's second link is refused until the sweep.
    expect(unchangedCodeOf(root, () => files.read(target))).toBe('refused');
    sweep = files.sweepStaging();
    expect(sweep).toEqual({ removed: [basename(temp)], kept: [] });
    expect(lstatSync(target).nlink).toBe(1);
    const snapshot = files.read(target);
    expect(Buffer.from(snapshot?.bytes ?? new Uint8Array()).toString()).toBe('published by the writer');
    expect(readdirSync(root).sort()).toEqual([STAGING_FOLDER, 'published']);
    expect(namesIn(join(root, STAGING_FOLDER))).toEqual([]);
  });

  it('reads a file that live writers keep publishing (link, temp unlink) and removing as absent, whole or conflict, never refused', async () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    files.directory(join(root, STAGING_FOLDER), true);
    const target = join(root, 'published');
    const text = 'published over and over';
    const publisher = spawnFixture(FIXTURES, 'publisher.mjs', [join(root, STAGING_FOLDER), target, text, '5']);
    await publisher.line((line) => line === 'ready');

    const outcomes = { absent: 0, read: 0, conflict: 0, other: {} as Record<string, number> };
    for (let count = 0; count < MAX_PUBLISHED_READS; count += 1) {
      const result: { snapshot?: FileSnapshot | undefined } = {};
      const code = codeOf(() => {
        result.snapshot = files.read(target);
      });
      if (code === 'conflict') outcomes.conflict += 1;
      else if (code !== 'no error') tallyOne(outcomes.other, code);
      else if (result.snapshot === undefined) outcomes.absent += 1;
      else if (Buffer.from(result.snapshot.bytes).toString() === text) outcomes.read += 1;
      else tallyOne(outcomes.other, `torn read of ${result.snapshot.bytes.byteLength} bytes`);
    }
    await killAndReap(publisher);
    console.log(
      `published while read: ${outcomes.absent} absent, ${outcomes.read} whole reads, ${outcomes.conflict} conflicts`,
    );
    expect(outcomes.other).toEqual({});
    expect(outcomes.conflict).toBeGreaterThan(0);
  });
});

describe('sweepStaging', () => {
  it('answers nothing removed and nothing kept when there is no staging folder, and makes none', () => {
    const root = makeRoot();
    expect(new PrivateFiles(root).sweepStaging()).toEqual({ removed: [], kept: [] });
    expect(readdirSync(root)).toEqual([]);
  });

  it("removes a dead writer's temp (killed at link) and names it in removed", async () => {
    const root = makeRoot();
    const target = join(root, 'file');
    const writer = spawnWriter({
      root,
      operations: [{ op: 'create', path: target, text: 'never published' }],
      stop: { how: 'kill', action: 'link' },
    });
    const end = await writer.closed;
    expect(end.signal).toBe('SIGKILL');
    const step = lastStep(writer);
    expect(step.action).toBe('link');
    const temps = writerMessages(writer, 'step') as MutationStep[];
    const temp = temps.find((candidate) => candidate.action === 'write')?.path ?? '';
    expect(existsSync(temp)).toBe(true);
    expect(existsSync(target)).toBe(false);
    expect(namesIn(join(root, STAGING_FOLDER))).toEqual([basename(temp)]);

    const steps: MutationStep[] = [];
    const files = new PrivateFiles(root, { hooks: { beforeMutation: (seen) => steps.push(plainStep(seen)) } });
    expect(files.sweepStaging()).toEqual({ removed: [basename(temp)], kept: [] });
    expect(existsSync(temp)).toBe(false);
    expect(namesIn(join(root, STAGING_FOLDER))).toEqual([]);
    expect(steps).toEqual([
      { operation: 'sweep-staging', action: 'unlink', path: temp },
      { operation: 'sweep-staging', action: 'fsync-directory', path: join(root, STAGING_FOLDER) },
    ]);
    expect(files.read(target)).toBeUndefined();
  });

  it("keeps a live writer's temp (paused after write and fsync), and removes it once the writer is killed", async () => {
    const root = makeRoot();
    const target = join(root, 'file');
    const writer = spawnWriter({
      root,
      operations: [{ op: 'create', path: target, text: 'in flight' }],
      stop: { how: 'pause', action: 'link' },
    });
    await writer.line(isMessage('paused'));
    const temp = (writerMessages(writer, 'step') as MutationStep[]).find((step) => step.action === 'write')?.path ?? '';
    expect(existsSync(temp)).toBe(true);
    const files = new PrivateFiles(root);
    expect(files.sweepStaging()).toEqual({ removed: [], kept: [basename(temp)] });
    expect(existsSync(temp)).toBe(true);

    await killAndReap(writer);
    expect(files.sweepStaging()).toEqual({ removed: [basename(temp)], kept: [] });
    expect(namesIn(join(root, STAGING_FOLDER))).toEqual([]);
  });

  it('lets a paused writer finish once released, leaving nothing in staging', async () => {
    const root = makeRoot();
    const target = join(root, 'file');
    const writer = spawnWriter({
      root,
      operations: [{ op: 'create', path: target, text: 'finished' }],
      stop: { how: 'pause', action: 'fsync' },
    });
    await writer.line(isMessage('paused'));
    expect(new PrivateFiles(root).sweepStaging().kept).toHaveLength(1);
    writer.process.stdin.end('\n');
    const end = await writer.closed;
    expect(end.code).toBe(0);
    expect(Buffer.from(new PrivateFiles(root).read(target)?.bytes ?? new Uint8Array()).toString()).toBe('finished');
    expect(namesIn(join(root, STAGING_FOLDER))).toEqual([]);
  });

  it('keeps names it cannot parse, names of another host and names of this live process; removes a gone pid', async () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    files.directory(join(root, STAGING_FOLDER), true);
    const me = currentProcess();
    const gone = await identityOfChild();
    const names = {
      unparsable: 'not-a-writer.tmp',
      otherHost: stagingName({ ...me, host: `${me.host}-elsewhere` }),
      mine: stagingName(me),
      minePidOnly: stagingName({ pid: me.pid, host: me.host }),
      gone: stagingName(gone),
      gonePidOnly: stagingName({ pid: gone.pid, host: gone.host }),
    };
    for (const name of Object.values(names)) {
      writeFileSync(join(root, STAGING_FOLDER, name), 'leftover', { mode: 0o600 });
    }
    const sweep = files.sweepStaging();
    expect(sweep.removed).toEqual([names.gone, names.gonePidOnly].sort());
    expect(sweep.kept).toEqual([names.unparsable, names.otherHost, names.mine, names.minePidOnly].sort());
    expect(namesIn(join(root, STAGING_FOLDER))).toEqual(sweep.kept);
  });

  it('removes a temp left with a second link to a published file by a dead writer, making the file readable', async () => {
    const root = makeRoot();
    const files = new PrivateFiles(root);
    const target = join(root, 'file');
    files.create(target, bytesOf('published'));
    const gone = await identityOfChild();
    const leftover = join(root, STAGING_FOLDER, stagingName(gone));
    linkSync(target, leftover);
    expect(codeOf(() => files.read(target))).toBe('refused');
    expect(files.sweepStaging()).toEqual({ removed: [basename(leftover)], kept: [] });
    expect(codeOf(() => files.read(target))).toBe('no error');
    expect(ownerStatus(gone.pid, gone.host, gone.processStart)).toBe('absent');
  });
});
