import { createHash, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { codeOf } from '../test/helpers.js';
import {
  JOURNAL_RECORD_NAME,
  PRIVATE_ROOT_NAME,
  SERVICE_ENTRIES,
  SERVICE_FILE_NAMES,
  START_CLAIM_MARKER_NAME,
  START_CLAIM_NAME,
  journalRecord,
  privateRootPlaces,
  startClaimMarker,
  startClaimPlaces,
  stateHomeLayout,
  workspacePlaces,
} from './layout.js';

// The layout's paths computed by hand from docs/layout.md; registry's and coordination's tests
// check stateHomeLayout and workspacePlaces the same way.
const ROOT = '/home/someone/project';
const NAME = createHash('sha256').update(ROOT).digest('hex').slice(0, 32);

describe('the paths below a private root', () => {
  it('are those of the workspace whose root names it, without the root', () => {
    const { root, mark, ...places } = workspacePlaces(ROOT, '/state');
    expect(root).toBe(ROOT);
    expect(mark).toBe(`${ROOT}/.leasehold/owner.json`);
    expect(privateRootPlaces('/state', NAME)).toEqual(places);
    expect(places.privateRoot).toBe(`/state/v1/workspaces/${NAME}`);
    expect(PRIVATE_ROOT_NAME.test(NAME)).toBe(true);
  });

  it('refuse a name that is not a private root, and a bad state home', () => {
    for (const name of ['..', `${NAME}x`, NAME.toUpperCase(), '']) {
      expect(
        codeOf(() => privateRootPlaces('/state', name)),
        name,
      ).toBe('refused');
    }
    expect(codeOf(() => privateRootPlaces('state', NAME))).toBe('refused');
  });

  it('name every service file by a name the service folder allows', () => {
    const places = privateRootPlaces('/state', NAME);
    for (const [key, name] of Object.entries(SERVICE_FILE_NAMES)) {
      expect(places[key as keyof typeof SERVICE_FILE_NAMES]).toBe(`${places.service}/${name}`);
      expect(SERVICE_ENTRIES).toContain(name);
    }
  });
});

describe('a start claim', () => {
  it('is named after the private root, beside the namespace, and so are its markers', () => {
    const claim = startClaimPlaces(ROOT, '/state');
    const token = randomUUID();
    expect(claim).toEqual({
      folder: '/state/start-claims',
      claim: `/state/start-claims/${NAME}.json`,
      markerPrefix: `${NAME}.takeover-`,
    });
    expect(startClaimMarker(claim, token)).toBe(`/state/start-claims/${NAME}.takeover-${token}.json`);
    expect(START_CLAIM_NAME.test(`${NAME}.json`)).toBe(true);
    expect(START_CLAIM_MARKER_NAME.test(`${NAME}.takeover-${token}.json`)).toBe(true);
    expect(START_CLAIM_NAME.test(`${NAME}.takeover-${token}.json`)).toBe(false);
  });

  it('refuses a root or state home that is not absolute and normalised', () => {
    expect(codeOf(() => startClaimPlaces('relative', '/state'))).toBe('refused');
    expect(codeOf(() => startClaimPlaces(ROOT, '/state/'))).toBe('refused');
  });
});

describe('a journal record', () => {
  it('is named by its time, digits only, then its token, and matches JOURNAL_RECORD_NAME', () => {
    const token = randomUUID();
    const path = journalRecord(stateHomeLayout('/state'), new Date('2026-01-02T03:04:05.678Z'), token);
    expect(path).toBe(`/state/v1/journal/20260102T030405678Z-${token}.json`);
    expect(JOURNAL_RECORD_NAME.test(path.slice('/state/v1/journal/'.length))).toBe(true);
  });
});
