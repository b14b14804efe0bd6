import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import type { MutationStep } from '@leasehold/private-files';
import { acquireWorkspace, inspectWorkspace } from '@leasehold/coordination';
import {
  caughtErrors,
  cleanUp,
  handPlaces,
  killAndReap,
  makePlace,
  makeWorkspace,
  messageOf,
  pathExists,
  replaceFile,
  sha256Hex,
  spawnPlanned,
  stateListing,
} from '@leasehold/test-utils';
import {
  FIXTURES,
  OWNER_CONFIG,
  PARENT_ENDPOINT,
  capabilityOf,
  coordinationOf,
  errorOf,
  grantOf,
  ioError,
  journalRecords,
  liveOwner,
  recoverWith,
  viewOf,
  type RecovererPlan,
} from '../test/helpers.js';

afterEach(cleanUp);

// The capability's bytes (docs/threats.md, "The one secret") appear in no output, error,
// digest or record. The capability is read by hand from its file while the
// owner runs; every form of it is searched for: the token, its SHA-256, the
// SHA-256 of the file (its identity), and the raw 32 bytes in hex and base64.

/** Every form of the secret that must never show. */
function secretForms(capability: string, fileBytes: Uint8Array): string[] {
  const raw = Buffer.from(capability, 'base64url');
  expect(raw).toHaveLength(32);
  return [capability, sha256Hex(capability), sha256Hex(fileBytes), raw.toString('hex'), raw.toString('base64')];
}

/** Every way an error can be shown: String, message, stack, JSON, util.inspect, down its cause chain. */
function renderingsOf(error: unknown): string[] {
  const shown: string[] = [];
  for (let current: unknown = error, depth = 0; current !== undefined && depth < 8; depth += 1) {
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- String() of any value is one of the texts checked
    shown.push(String(current), JSON.stringify(current) ?? '', inspect(current, { depth: 8, showHidden: true }));
    if (current instanceof Error) {
      shown.push(current.message, current.stack ?? '');
      current = current.cause;
    } else current = undefined;
  }
  return shown;
}

function expectNoSecret(texts: readonly string[], secrets: readonly string[], what: string): void {
  for (const text of texts) {
    for (const secret of secrets) expect(text.includes(secret), `${what} shows a form of the capability`).toBe(false);
  }
}

describe('the capability never shows (docs/threats.md, "The one secret")', () => {
  it('in no snapshot, digest, error, record or child output', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'workspace');
    const places = handPlaces(place.stateHome, root);
    const owner = await liveOwner(place, root);
    const capability = capabilityOf(place.stateHome, root);
    const secrets = secretForms(capability, readFileSync(places.capability));
    // The search finds the secret where it does live: in its own file.
    expect(readFileSync(places.capability, 'utf8')).toContain(secrets[0]);
    const errors: { what: string; error: unknown }[] = [];
    const snapshots: string[] = [];

    // While the owner lives: quarantine.
    const live = viewOf(place, root);
    snapshots.push(JSON.stringify(live));
    errors.push({ what: 'quarantine (prepare)', error: await errorOf(() => grantOf(place, root, live.digest)) });
    errors.push({ what: 'quarantine (recover)', error: await errorOf(() => recoverWith(place, root, live.digest)) });
    expect(await killAndReap(owner)).toMatchObject({ signal: 'SIGKILL' });

    // The digest covers the capability by its stamp: rewritten with identical bytes, the digest changes.
    const dead = viewOf(place, root);
    snapshots.push(JSON.stringify(dead));
    const grantedBefore = grantOf(place, root, dead.digest);
    replaceFile(place.base, places.capability, readFileSync(places.capability));
    const rewritten = viewOf(place, root);
    snapshots.push(JSON.stringify(rewritten));
    expect(rewritten.digest).not.toBe(dead.digest);
    expect(rewritten.fences).toEqual(dead.fences);

    errors.push({ what: 'stale digest', error: await errorOf(() => recoverWith(place, root, dead.digest)) });
    errors.push({ what: 'malformed digest', error: await errorOf(() => grantOf(place, root, capability)) });
    // A grant whose capability changed since its snapshot: the effect's own check names the file, not its bytes.
    errors.push({ what: 'changed capability (release)', error: await errorOf(() => grantedBefore.release(() => {})) });
    const used = grantOf(place, root, rewritten.digest);
    errors.push({
      what: 'bridge down',
      error: await errorOf(() =>
        used.release(() => {
          throw new Error('bridge down');
        }),
      ),
    });
    errors.push({ what: 'consumed grant', error: await errorOf(() => used.release(() => {})) });
    // An I/O error right at the capability's removal (a failing disk reports the path, never the bytes).
    const failing = {
      beforeMutation(step: MutationStep) {
        if (step.operation === 'remove' && step.path === places.capability) throw ioError(step);
      },
    };
    errors.push({
      what: 'EIO at the capability',
      error: await errorOf(() => recoverWith(place, root, viewOf(place, root).digest, { hooks: failing })),
    });
    expect(errors.map(({ error }) => (error as { code?: string }).code)).toEqual([
      'quarantine',
      'quarantine',
      'conflict',
      'refused',
      'conflict',
      undefined,
      'consumed-grant',
      'EIO',
    ]);
    expect(pathExists(places.capability)).toBe(true);

    // A recovery in a child, whose every output line and error output is searched too.
    const last = viewOf(place, root);
    snapshots.push(JSON.stringify(last));
    const plan: RecovererPlan = { workspace: root, stateHome: place.stateHome, digest: last.digest };
    const child = spawnPlanned(FIXTURES, 'recoverer.mjs', plan);
    expect(await messageOf(child, 'done')).toMatchObject({ outcome: { recovered: true } });
    const end = await child.closed;
    expect(end).toMatchObject({ code: 0, signal: null });
    expect(pathExists(places.capability)).toBe(false);
    const records = journalRecords(place.stateHome).map((name) => readFileSync(join(places.journal, name), 'utf8'));
    // The recovery that failed at the capability, and the child's.
    expect(records).toHaveLength(2);

    for (const { what, error } of errors) expectNoSecret(renderingsOf(error), secrets, what);
    for (const error of caughtErrors) expectNoSecret(renderingsOf(error), secrets, 'an error caught by codeOf');
    expectNoSecret(snapshots, secrets, 'a snapshot');
    expectNoSecret([dead.digest, rewritten.digest, last.digest], secrets, 'a digest');
    expectNoSecret(records, secrets, 'a journal record');
    expectNoSecret([...child.lines, end.stderr], secrets, 'the recovering child');
    // Nothing else under the state home holds it once the capability file is gone.
    const leftovers = Object.values(stateListing(place.stateHome)).flatMap((entry) =>
      entry.kind === 'file' ? [Buffer.from(entry.bytes, 'hex').toString('utf8')] : [],
    );
    expect(leftovers.length).toBeGreaterThan(0);
    expectNoSecret(leftovers, secrets, 'a file left under the state home');

    const coordination = coordinationOf(place, root);
    expect(inspectWorkspace(coordination).status).toBe('stopped');
    await (await acquireWorkspace(coordination, OWNER_CONFIG, PARENT_ENDPOINT)).release();
  });
});
