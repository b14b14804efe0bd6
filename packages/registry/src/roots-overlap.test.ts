import { absolutePath } from '@leasehold/contracts';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { rootsOverlap } from './index.js';

/** The segments of a normalised absolute path: `/` has none. */
function segmentsOf(path: string): string[] {
  return path === '/' ? [] : path.slice(1).split('/');
}

function isSegmentPrefix(prefix: readonly string[], path: readonly string[]): boolean {
  return prefix.length <= path.length && prefix.every((segment, index) => segment === path[index]);
}

/** The reference definition: one path's segments are a prefix of the other's. */
function referenceOverlap(a: string, b: string): boolean {
  const left = segmentsOf(a);
  const right = segmentsOf(b);
  return isSegmentPrefix(left, right) || isSegmentPrefix(right, left);
}

// Short segments from a tiny alphabet, so that equal paths, ancestors and
// string prefixes that are not segment prefixes (`a` and `ab`) all occur often.
const segment = fc
  .array(fc.constantFrom('a', 'b', '.', '-'), { minLength: 1, maxLength: 3 })
  .map((characters) => characters.join(''))
  .filter((name) => name !== '.' && name !== '..');
const normalisedPath = fc.array(segment, { maxLength: 4 }).map((segments) => `/${segments.join('/')}`);

describe('rootsOverlap', () => {
  it.each([
    ['/a', '/a', true],
    ['/', '/', true],
    ['/a', '/a/b', true],
    ['/a/b', '/a', true],
    ['/', '/a', true],
    ['/a/b/c', '/', true],
    ['/a/b', '/a/bc', false],
    ['/a/bc', '/a/b', false],
    ['/ab', '/a', false],
    ['/a', '/ab', false],
    ['/a/b', '/a/c', false],
    ['/a.b', '/a', false],
  ])('%s and %s overlap: %s', (a, b, expected) => {
    expect(rootsOverlap(a, b)).toBe(expected);
  });

  it('draws only normalised absolute paths (the generator is sound)', () => {
    fc.assert(
      fc.property(normalisedPath, (path) => {
        expect(absolutePath.safeParse(path).success).toBe(true);
      }),
    );
  });

  it('is symmetric', () => {
    fc.assert(
      fc.property(normalisedPath, normalisedPath, (a, b) => {
        expect(rootsOverlap(a, b)).toBe(rootsOverlap(b, a));
      }),
    );
  });

  it('is reflexive', () => {
    fc.assert(
      fc.property(normalisedPath, (a) => {
        expect(rootsOverlap(a, a)).toBe(true);
      }),
    );
  });

  it('equals the reference definition on path segments', () => {
    let overlapping = 0;
    let apart = 0;
    fc.assert(
      fc.property(normalisedPath, normalisedPath, (a, b) => {
        const expected = referenceOverlap(a, b);
        if (expected) overlapping += 1;
        else apart += 1;
        expect(rootsOverlap(a, b)).toBe(expected);
      }),
      { numRuns: 2000 },
    );
    // The generator must exercise both answers, or the property proves little.
    expect(overlapping).toBeGreaterThan(50);
    expect(apart).toBeGreaterThan(50);
  });

  it('equals the reference definition for a path and a derived one (ancestor, descendant, sibling, string prefix)', () => {
    const derived = fc.tuple(normalisedPath, segment, segment).chain(([base, first, second]) => {
      const join = (path: string, name: string) => (path === '/' ? `/${name}` : `${path}/${name}`);
      return fc.constantFrom(
        [base, join(base, first)],
        [join(base, first), join(join(base, first), second)],
        [join(base, first), join(base, second)],
        [join(base, first), join(base, `${first}${second}`)],
        [join(base, `${first}${second}`), join(base, first)],
      );
    });
    fc.assert(
      fc.property(derived, ([a, b]) => {
        expect(rootsOverlap(a, b)).toBe(referenceOverlap(a, b));
      }),
    );
  });

  it('always overlaps /x with /x/<segment>', () => {
    fc.assert(
      fc.property(segment, segment, (x, child) => {
        expect(rootsOverlap(`/${x}`, `/${x}/${child}`)).toBe(true);
        expect(rootsOverlap(`/${x}/${child}`, `/${x}`)).toBe(true);
      }),
    );
  });
});
