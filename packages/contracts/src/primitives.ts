import { z } from 'zod';
import { lazy } from './lazy.js';

/** A string of at most `max` characters with no NUL; `nonEmpty` also refuses "". */
export function text(max: number, options: { nonEmpty?: boolean } = {}) {
  const base = options.nonEmpty === true ? z.string().min(1).max(max) : z.string().max(max);
  return base.refine((value) => !value.includes('\0'), { message: 'contains a NUL character' });
}

function isNormalisedAbsolute(value: string): boolean {
  if (value === '/') return true;
  if (!value.startsWith('/') || value.endsWith('/')) return false;
  return value
    .slice(1)
    .split('/')
    .every((segment) => segment !== '' && segment !== '.' && segment !== '..');
}

/** An absolute, normalised path of at most 4096 characters: no `.`/`..` segment, no doubled or trailing `/`. */
export const absolutePath = lazy(() =>
  text(4096, { nonEmpty: true }).refine(isNormalisedAbsolute, { message: 'not an absolute, normalised path' }),
);

/** A SHA-256 digest in lowercase hex. */
export const hash = lazy(() => z.string().regex(/^[0-9a-f]{64}$/, { message: 'not a lowercase SHA-256 hex digest' }));

/** A lowercase UUID (8-4-4-4-12 hex). */
export const id = lazy(() =>
  z
    .string()
    .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, { message: 'not a lowercase UUID' }),
);

/** 32 random bytes in base64url without padding. */
export const capabilityToken = lazy(() =>
  z.string().regex(/^[A-Za-z0-9_-]{43}$/, { message: 'not a capability token' }),
);

/** A process id: an integer from 1 to 2^31-1. */
export const pid = lazy(() =>
  z
    .int()
    .min(1)
    .max(2 ** 31 - 1),
);

/** A host name as the owner saw it: 1 to 255 characters. */
export const host = lazy(() => text(255, { nonEmpty: true }));

/** Identifies one incarnation of a process (boot id, PID namespace, start time on Linux). */
export const processStart = lazy(() => text(128, { nonEmpty: true }));

const ENDPOINT = /^http:\/\/(?:127\.0\.0\.1|\[::1\]):(0|[1-9][0-9]{0,4})$/;

function endpointWithPorts(lowestPort: number) {
  return z.string().refine(
    (value) => {
      const port = ENDPOINT.exec(value)?.[1];
      return port !== undefined && Number(port) >= lowestPort && Number(port) <= 65535;
    },
    {
      message:
        lowestPort === 0 ? 'not a loopback endpoint (port 0 to 65535)' : 'not a loopback endpoint (port 1 to 65535)',
    },
  );
}

/** Exactly `http://127.0.0.1:PORT` or `http://[::1]:PORT`, PORT 1..65535 without leading zeros. */
export const endpoint = lazy(() => endpointWithPorts(1));

/** Like `endpoint`, and also port `0`: "any free port". */
export const anyPortEndpoint = lazy(() => endpointWithPorts(0));
