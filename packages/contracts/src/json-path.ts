// A JSON path for messages. Keys outside the plain-identifier shape are not
// printed: a key comes from the input too, and a message must never echo input
// that could be a secret (a capability token is 43 characters, so it never fits).
const PRINTABLE_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,31}$/;

export type PathSegment = string | number;

export function formatPath(path: readonly PropertyKey[]): string {
  return (
    '$' +
    path
      .map((segment) => {
        if (typeof segment === 'number') return `[${segment}]`;
        if (typeof segment === 'string' && PRINTABLE_KEY.test(segment)) return `.${segment}`;
        return '[?]';
      })
      .join('')
  );
}
