/** The errno code of a Node system error, if it is one. */
function errnoOf(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string') {
    return error.code;
  }
  return undefined;
}

/** True when `error` is a system error with one of `codes`; swallow only what you expect. */
export function isErrno(error: unknown, ...codes: string[]): boolean {
  const code = errnoOf(error);
  return code !== undefined && codes.includes(code);
}
