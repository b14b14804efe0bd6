import { createHash, timingSafeEqual } from 'node:crypto';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * A check of `Authorization: Bearer <token>` against one capability, in
 * constant time: both sides are hashed to one fixed length first, so neither
 * the token's length nor its content leaks through timing. Only the digest
 * of the capability is kept.
 */
export function bearerCheck(capability: string): (header: string | undefined) => boolean {
  const expected = digest(capability);
  return (header) => {
    const token = /^Bearer ([A-Za-z0-9_-]{1,256})$/.exec(header ?? '')?.[1];
    const equal = timingSafeEqual(digest(token ?? ''), expected);
    return token !== undefined && equal;
  };
}
