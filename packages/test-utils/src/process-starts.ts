/**
 * `processStart` (Linux: `linux:<boot id>:<pid namespace>:<start time>`) with one field changed: the
 * same pid as another boot (a holder proved gone) or another PID namespace (one that cannot be told
 * from here) would record it. Throws on any other form, which these tests cannot use.
 */
export function processStartWith(
  processStart: string | undefined,
  field: 'bootId' | 'pidNamespace',
  value: string,
): string {
  const parts = /^linux:([0-9a-f-]{36}):([0-9]+):([0-9]+)$/.exec(processStart ?? '');
  if (parts === null) throw new Error('these tests need a Linux process start');
  const [, bootId, pidNamespace, startTime] = parts;
  return field === 'bootId' ? `linux:${value}:${pidNamespace}:${startTime}` : `linux:${bootId}:${value}:${startTime}`;
}
