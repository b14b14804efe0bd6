import { afterEach, describe, expect, it } from 'vitest';
import { fileOwnership } from '@leasehold/coordination';
import {
  cleanUp,
  codeOfAsync,
  killAndReap,
  spawnCommand,
  makePlace,
  makeWorkspace,
  pathExists,
  replaceFile,
  serviceFences,
} from '@leasehold/test-utils';
import { OWNER_CONFIG, PARENT_ENDPOINT, deadOwner, journalRecords, liveOwner, viewOf } from '../test/helpers.js';
import { processIdentity } from '@leasehold/private-files';
import { ContractError, fileRecovery } from './index.js';

afterEach(cleanUp);

/** Grants authority. */
const granted = (): void => {};

describe('fileRecovery', () => {
  it('reads an empty journal before any recovery, and refuses a journal file that is not a record, naming it', async () => {
    const place = makePlace('recovery');
    const recovery = fileRecovery({ stateHome: place.stateHome });
    expect(await recovery.journal()).toEqual([]);
    const root = makeWorkspace(place, 'crashed');
    await deadOwner(place, root);
    const view = await recovery.view(root);
    const result = await recovery.recover(root, { expectedDigest: view.digest, assertAuthority: granted });
    if (!result.recovered) throw new Error('it recovered nothing');
    replaceFile(place.base, result.record, new TextEncoder().encode('{"schema":"leasehold.recovery-record/1"}'));
    const error = await recovery.journal().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(ContractError.is(error, 'refused')).toBe(true);
    expect((error as ContractError).message).toContain(result.record);
  });

  it('finds nothing to recover in a workspace nobody owned, and says so', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'never');
    const recovery = fileRecovery({ stateHome: place.stateHome });
    const view = await recovery.view(root);
    expect(view).toMatchObject({ root, fences: [], holders: [], clear: true });
    expect(await recovery.recover(root, { expectedDigest: view.digest, assertAuthority: granted })).toEqual({
      recovered: false,
      reason: 'clear',
    });
  });

  it('shows a SIGKILLed owner’s fences where they are, recovers them with the digest, and a fresh acquire succeeds', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'crashed');
    const { pid } = await deadOwner(place, root);
    const recovery = fileRecovery({ stateHome: place.stateHome });
    const ownership = fileOwnership({ stateHome: place.stateHome });
    // Its row still fences the root, and names its gone process: quarantine until recovered.
    expect(await codeOfAsync(() => ownership.acquire(root, OWNER_CONFIG, { boundEndpoint: PARENT_ENDPOINT }))).toBe(
      'quarantine',
    );

    const view = await recovery.view(root);
    const state = viewOf(place, root);
    expect(view.digest).toBe(state.digest);
    expect(view.clear).toBe(false);
    expect(view.fences.map(({ kind, path }) => ({ kind, path }))).toEqual(
      state.fences.map(({ kind, path }) => ({ kind, path })),
    );
    for (const { path } of view.fences) expect(pathExists(path), path).toBe(true);
    expect(view.holders).toEqual([
      { holder: expect.objectContaining({ pid }) as unknown, verdict: 'absent', fences: state.holders[0]?.fences },
    ]);

    const wrong = '0'.repeat(64);
    expect(await codeOfAsync(() => recovery.recover(root, { expectedDigest: wrong, assertAuthority: granted }))).toBe(
      'conflict',
    );
    const denied = recovery.recover(root, {
      expectedDigest: view.digest,
      assertAuthority: () => {
        throw new ContractError('refused', 'not this operator');
      },
    });
    expect(await codeOfAsync(denied)).toBe('refused');
    expect(journalRecords(place.stateHome)).toEqual([]);

    const result = await recovery.recover(root, { expectedDigest: view.digest, assertAuthority: granted });
    expect(result).toMatchObject({ recovered: true });
    if (!result.recovered) throw new Error('unreachable');
    expect(journalRecords(place.stateHome).map((name) => result.record.endsWith(name))).toEqual([true]);
    expect(serviceFences(place.stateHome, root)).toEqual([]);
    expect((await recovery.view(root)).clear).toBe(true);

    // The journal reads the record back: when, which root, the digest reviewed, who, what it released.
    const entries = await recovery.journal();
    expect(entries).toEqual([
      {
        record: result.record,
        root,
        digest: view.digest,
        recordedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        operator: { pid: process.pid, host: expect.any(String), user: expect.any(String) },
        fences: state.fences.map(({ kind, path }) => ({ kind, path })),
      },
    ]);
    expect(await recovery.journal(root)).toEqual(entries);
    expect(await recovery.journal(makeWorkspace(place, 'other'))).toEqual([]);

    const lease = await ownership.acquire(root, OWNER_CONFIG, { boundEndpoint: PARENT_ENDPOINT });
    expect(lease.owner).toMatchObject({ pid: process.pid, phase: 'idle', endpoint: PARENT_ENDPOINT });
    await lease.release();
    expect(await ownership.inspect(root)).toMatchObject({ status: 'stopped', epoch: lease.owner.epoch });
  });

  it('never recovers over a live owner: its holder is live, and recover is quarantine', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'alive');
    const child = await liveOwner(place, root);
    const recovery = fileRecovery({ stateHome: place.stateHome });
    const view = await recovery.view(root);
    expect(view.holders.map(({ holder, verdict }) => ({ pid: holder.pid, verdict }))).toEqual([
      { pid: child.pid, verdict: 'live' },
    ]);
    expect(
      await codeOfAsync(() => recovery.recover(root, { expectedDigest: view.digest, assertAuthority: granted })),
    ).toBe('quarantine');
    expect(serviceFences(place.stateHome, root)).not.toEqual([]);
  });
});

describe('fileRecovery.fencedProcess', () => {
  it('proves a live process by pid and start time, with its command line and group, and a gone one absent', async () => {
    const recovery = fileRecovery();
    const child = spawnCommand('sleep', ['1000']);
    const { host, processStart } = processIdentity(child.pid)!;
    const recorded = { pid: child.pid, host, processStart: processStart! };
    expect(recovery.fencedProcess(recorded)).toEqual({
      verdict: 'live',
      commandLine: ['sleep', '1000'],
      processGroup: expect.any(Number),
      pidInUse: true,
    });
    // Another start time under the same pid: a reused pid is absent, though the pid is in use.
    const reused = {
      ...recorded,
      processStart: recorded.processStart.replace(/:(\d+)$/, (_, time: string) => `:${BigInt(time) - 1n}`),
    };
    expect(recovery.fencedProcess(reused)).toEqual({
      verdict: 'absent',
      commandLine: null,
      processGroup: null,
      pidInUse: true,
    });
    // Without a start time it is judged by its pid alone, and shows nothing it cannot prove.
    expect(recovery.fencedProcess({ pid: child.pid, host })).toEqual({
      verdict: 'live',
      commandLine: null,
      processGroup: null,
      pidInUse: true,
    });
    await killAndReap(child);
    expect(recovery.fencedProcess(recorded)).toEqual({
      verdict: 'absent',
      commandLine: null,
      processGroup: null,
      pidInUse: false,
    });
    expect(recovery.fencedProcess({ ...recorded, host: `${recorded.host}-elsewhere` })).toMatchObject({
      verdict: 'ambiguous',
      commandLine: null,
      processGroup: null,
    });
  });
});
