import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Checkout, acquireWorkspace, inspectWorkspace } from '@leasehold/coordination';
import {
  cleanUp,
  loopbackEndpoint,
  handPlaces,
  killAndReap,
  makePlace,
  makeWorkspace,
  messageOf,
  spawnSharedFixture,
  stateListing,
} from '@leasehold/test-utils';
import {
  FIXTURE_MODULES,
  OWNER_CONFIG,
  PARENT_ENDPOINT,
  changedEntries,
  coordinationOf,
  deadOwner,
  journalRecords,
  recoverWith,
  rowsOf,
  viewOf,
  writeByHand,
} from '../test/helpers.js';

afterEach(cleanUp);

// Files that name no dead holder of the recovered workspace (docs/ownership.md, "Recovery: grant and release") are never
// touched. Here, next to a dead owner's workspace: a plain tool's live
// checkout lock on another workspace, a plain tool's checkout lock whose
// holder died, a stray file in a third workspace's private root (which makes
// that workspace unavailable), and a live owner's row and files, held by this
// process. Only the dead owner's own files, its row and the journal change.

describe('recovery touches nothing but the dead owner’s fences', () => {
  it('leaves other workspaces byte-, inode- and mtime-identical', async () => {
    const place = makePlace('recovery');
    const dead = makeWorkspace(place, 'dead');
    const toolHeld = makeWorkspace(place, 'tool-held');
    const toolDied = makeWorkspace(place, 'tool-died');
    const stray = makeWorkspace(place, 'stray');
    const held = makeWorkspace(place, 'held');

    await deadOwner(place, dead);
    const liveTool = spawnSharedFixture(
      'checkout-holder',
      { workspace: toolHeld, stateHome: place.stateHome },
      FIXTURE_MODULES,
    );
    await messageOf(liveTool, 'held');
    const deadTool = spawnSharedFixture(
      'checkout-holder',
      { workspace: toolDied, stateHome: place.stateHome },
      FIXTURE_MODULES,
    );
    await messageOf(deadTool, 'held');
    expect(await killAndReap(deadTool)).toMatchObject({ signal: 'SIGKILL' });
    const strayCoordination = coordinationOf(place, stray);
    await (await acquireWorkspace(strayCoordination, OWNER_CONFIG, loopbackEndpoint(45_010))).release();
    writeByHand(join(handPlaces(place.stateHome, stray).privateRoot, 'notes.txt'), 'left here by hand\n');
    const heldCoordination = coordinationOf(place, held);
    const heldLease = await acquireWorkspace(heldCoordination, OWNER_CONFIG, PARENT_ENDPOINT);

    expect(new Checkout(toolHeld, { stateHome: place.stateHome }).inspect()?.verdict).toBe('live');
    expect(new Checkout(toolDied, { stateHome: place.stateHome }).inspect()?.verdict).toBe('absent');
    expect(inspectWorkspace(strayCoordination).status).toBe('unavailable');
    const heldRow = rowsOf(place.stateHome).find((row) => row.root === held);
    expect(heldRow).toMatchObject({ pid: process.pid, endpoint: PARENT_ENDPOINT });

    const coordination = coordinationOf(place, dead);
    const snapshot = viewOf(place, dead);
    const deadPlaces = handPlaces(place.stateHome, dead);
    // Only the dead owner's files and its row are fences of this workspace.
    for (const fence of snapshot.fences) {
      expect([
        deadPlaces.roots,
        deadPlaces.format,
        deadPlaces.config,
        deadPlaces.registration,
        deadPlaces.ownerLock,
        deadPlaces.capability,
        deadPlaces.checkoutLock,
        deadPlaces.mark,
      ]).toContain(fence.path);
    }
    expect(snapshot.holders).toHaveLength(1);
    expect(snapshot.holders[0]?.verdict).toBe('absent');

    const before = stateListing(place.stateHome);
    expect(await recoverWith(place, dead, snapshot.digest)).toMatchObject({ recovered: true });
    const after = stateListing(place.stateHome);

    const [record] = journalRecords(place.stateHome);
    const ws = `v1/workspaces/${deadPlaces.privateRootName}`;
    expect(changedEntries(before, after)).toEqual(
      [
        'v1/journal',
        `v1/journal/${record}`,
        'v1/registry/roots.json',
        `${ws}/checkout.lock`,
        `${ws}/service/local-capability.json`,
        `${ws}/service/owner.lock`,
        `${ws}/service/registration.json`,
      ].sort(),
    );
    // roots.json changed only by losing the dead owner's row: the live owner's row is exactly as it was.
    expect(rowsOf(place.stateHome)).toEqual([heldRow]);
    heldLease.assert();
    expect(inspectWorkspace(heldCoordination)).toMatchObject({
      status: 'unavailable',
      owner: { pid: process.pid, phase: 'idle' },
    });
    expect(new Checkout(toolHeld, { stateHome: place.stateHome }).inspect()?.verdict).toBe('live');
    expect(new Checkout(toolDied, { stateHome: place.stateHome }).inspect()?.verdict).toBe('absent');
    expect(inspectWorkspace(strayCoordination).status).toBe('unavailable');

    // The recovered workspace is free again; the held one still is its owner's.
    expect(inspectWorkspace(coordination).status).toBe('stopped');
    await (await acquireWorkspace(coordination, OWNER_CONFIG, loopbackEndpoint(45_011))).release();
    await heldLease.release();
    expect(inspectWorkspace(heldCoordination).status).toBe('stopped');
  });
});
