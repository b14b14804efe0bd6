import { chmodSync, lstatSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { basename, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { decodeBytes, encode, recoveryRecordSchema } from '@leasehold/contracts';
import { cleanUp, codeOf, handPlaces, jsonOf, makePlace, makeWorkspace, replaceFile } from '@leasehold/test-utils';
import { deadOwner, journalRecords, placesOf, recoverWith, viewOf } from '../test/helpers.js';
import { Journal, RECOVERY_RECORD_BYTES, currentOperator } from './journal.js';

afterEach(cleanUp);

// The journal (docs/ownership.md, "The journal record"): one durable record per recovery in `<ns>/journal/`, naming the
// root, the digest, the operator and the fences with their holders, and
// decoding strictly as `leasehold.recovery-record/1`.

describe('the journal record', () => {
  it('decodes with recoveryRecordSchema and names root, digest, operator and fences', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'workspace');
    const places = handPlaces(place.stateHome, root);
    const { pid } = await deadOwner(place, root);
    // The dead owner as its registration names it (read by hand).
    const registration = jsonOf(places.registration) as { pid: number; host: string; processStart: string };
    expect(registration.pid).toBe(pid);
    const owner = { pid, host: registration.host, processStart: registration.processStart };

    const snapshot = viewOf(place, root);
    const outcome = await recoverWith(place, root, snapshot.digest);

    const names = journalRecords(place.stateHome);
    expect(names).toHaveLength(1);
    const path = join(places.journal, names[0]!);
    expect(outcome).toEqual({ recovered: true, record: path });
    const stats = lstatSync(path);
    expect(stats.isFile()).toBe(true);
    expect(stats.mode & 0o777).toBe(0o600);
    expect(stats.nlink).toBe(1);
    expect(lstatSync(places.journal).mode & 0o777).toBe(0o700);

    const bytes = readFileSync(path);
    const record = decodeBytes(recoveryRecordSchema, bytes, RECOVERY_RECORD_BYTES, 'record');
    // Canonical JSON: what it decodes to encodes back to the very bytes.
    expect(Buffer.from(encode(record)).equals(bytes)).toBe(true);
    expect(record.schema).toBe('leasehold.recovery-record/1');
    expect(record.root).toBe(root);
    expect(record.digest).toBe(snapshot.digest);
    expect(record.operator).toEqual({ pid: process.pid, host: hostname(), user: userInfo().username });
    expect(record.operator).toEqual(currentOperator());
    // The record's name begins with the time it records.
    expect(names[0]!.startsWith(`${record.recordedAt.replace(/[-:.]/g, '')}-`)).toBe(true);
    expect(record.fences).toEqual([
      { kind: 'registry-row', path: places.roots, holder: owner },
      { kind: 'service-format', path: places.format },
      { kind: 'service-config', path: places.config },
      { kind: 'registration', path: places.registration, holder: owner },
      { kind: 'owner-lock', path: places.ownerLock, holder: owner },
      { kind: 'capability', path: places.capability },
      { kind: 'checkout-lock', path: places.checkoutLock, holder: owner },
      { kind: 'folder-mark', path: places.mark, holder: owner },
    ]);
    // The same fences the snapshot showed (which also gives the registration's phase).
    expect(record.fences).toEqual(
      snapshot.fences.map(({ kind, path, holder }) => (holder === undefined ? { kind, path } : { kind, path, holder })),
    );
    expect(snapshot.fences.find((fence) => fence.kind === 'registration')?.phase).toBe('idle');
  });
});

describe('Journal (the durable bridge: docs/ownership.md, "The journal record")', () => {
  it('assertDurable holds while the record is unchanged, and is conflict once it is removed or rewritten', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'workspace');
    await deadOwner(place, root);
    const journal = new Journal(placesOf(place, root));
    const state = viewOf(place, root);
    expect(journal.folder).toBe(handPlaces(place.stateHome, root).journal);

    const kept = journal.record(state, currentOperator());
    journal.assertDurable(kept);
    const rewritten = journal.record(state, currentOperator());
    replaceFile(place.base, rewritten.path, readFileSync(rewritten.path));
    expect(codeOf(() => journal.assertDurable(rewritten))).toBe('conflict');
    const removed = journal.record(state, currentOperator());
    rmSync(removed.path);
    expect(codeOf(() => journal.assertDurable(removed))).toBe('conflict');
    journal.assertDurable(kept);
    expect(journalRecords(place.stateHome)).toEqual([basename(kept.path), basename(rewritten.path)].sort());
  });

  it('refuses to write into a journal folder that is not private, writing nothing', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'workspace');
    await deadOwner(place, root);
    const journal = handPlaces(place.stateHome, root).journal;
    mkdirSync(journal, { mode: 0o700 });
    chmodSync(journal, 0o755);
    expect(codeOf(() => new Journal(placesOf(place, root)).record(viewOf(place, root), currentOperator()))).toBe(
      'refused',
    );
    expect(journalRecords(place.stateHome)).toEqual([]);
  });
});
