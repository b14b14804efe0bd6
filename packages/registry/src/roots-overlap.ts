/**
 * Whether two absolute, normalised roots overlap: equal, or one is an
 * ancestor folder of the other. Segment-aware, so `/a/b` and `/a/bc` do not.
 * Symmetric. Two owners of overlapping roots would both own the inner tree.
 */
export function rootsOverlap(a: string, b: string): boolean {
  return a === b || isAncestor(a, b) || isAncestor(b, a);
}

function isAncestor(ancestor: string, path: string): boolean {
  const prefix = ancestor === '/' ? '/' : `${ancestor}/`;
  return path.startsWith(prefix);
}
