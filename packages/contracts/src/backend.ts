import { z } from 'zod';
import { encode } from './codec.js';
import { lazy, real, strictObject } from './lazy.js';
import { text } from './primitives.js';

// Which backend a state home uses: the record its format document keeps, and the words for it.

/** An etcd key prefix like `/leasehold/team`: segments of letters, digits, `.`, `_`, `-`; no `.`/`..` segment, no trailing `/`. */
export const etcdPrefix = lazy(() =>
  text(512, { nonEmpty: true }).refine(
    (value) =>
      /^(?:\/[A-Za-z0-9._-]+)+$/.test(value) &&
      !value.split('/').some((segment) => segment === '.' || segment === '..'),
    { message: 'not a key prefix like /leasehold/team (segments of letters, digits, ".", "_", "-"; no trailing "/")' },
  ),
);

/** A client URL of one etcd member: `http://` or `https://`, a host name, IPv4 or bracketed IPv6, and a port 1 to 65535; nothing else. */
export const etcdEndpoint = lazy(() =>
  text(300, { nonEmpty: true }).refine(
    (value) => {
      const port = /^https?:\/\/(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([1-9][0-9]{0,4})$/.exec(value)?.[1];
      return port !== undefined && Number(port) <= 65535;
    },
    { message: 'not an etcd client URL like http://10.0.0.5:2379' },
  ),
);

/**
 * Which backend a state home uses, as its format document records it: never a credential.
 * A format document without one is the file backend.
 */
export const backendSchema = lazy(() =>
  z.discriminatedUnion('kind', [
    strictObject({ kind: z.literal('files') }),
    strictObject({
      kind: z.literal('etcd'),
      endpoints: z.array(real(etcdEndpoint)).min(1).max(16),
      prefix: etcdPrefix,
    }),
  ]),
);
export type Backend = z.infer<typeof backendSchema>;

/** Whether two backends are one, by canonical encoding (so etcd endpoints in another order are another backend). */
export function sameBackend(a: Backend, b: Backend): boolean {
  return Buffer.from(encode(a)).equals(encode(b));
}

/** The backend in words, for a message: its kind, and for etcd its prefix and endpoints (it holds no credential). */
export function describeBackend(backend: Backend): string {
  return backend.kind === 'files'
    ? 'file backend'
    : `etcd backend (prefix ${backend.prefix} on ${backend.endpoints.join(', ')})`;
}
