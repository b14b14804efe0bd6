import { anyPortEndpoint, backendSchema, hash, safeDecode, type Backend } from '@leasehold/contracts';
import { handOverReasonProblem, type HandOverRequest } from '@leasehold/transport';
import type { CommandContext } from './context.js';
import { UsageError } from './remedies.js';

// A mistake in the command line itself is found before anything is opened or
// changed, and is a usage error (exit 2) with a remedy about the command line:
// never a `refused` that sends the person to `leasehold doctor` for a file.

type Value = CommandContext['values'][string];

/** A whole-number option of at least `least`, or undefined when it is not given. */
export function wholeNumber(value: Value, option: string, least: number): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (typeof value !== 'string' || !/^[0-9]+$/.test(value) || !Number.isSafeInteger(number) || number < least) {
    throw new UsageError(
      `${option} ${String(value)}: not a whole number of at least ${least}`,
      `give ${option} a whole number from ${least}, such as ${option}=${Math.max(least, 10)}`,
    );
  }
  return number;
}

/** How long a program may take to end after SIGTERM before its group is sent SIGKILL, by default. */
const DEFAULT_STOP_TIMEOUT_SECONDS = 10;

/** `--stop-timeout S` in ms: seconds from SIGTERM to SIGKILL of a program's process group, 10 when not given. */
export function stopTimeoutOption(value: Value): number {
  return (wholeNumber(value, '--stop-timeout', 0) ?? DEFAULT_STOP_TIMEOUT_SECONDS) * 1000;
}

/** `--endpoint`, checked by the rule the owner applies (contracts' loopback endpoint, port 0 for any free port). */
export function endpointOption(value: Value): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !anyPortEndpoint.safeParse(value).success) {
    throw new UsageError(
      `--endpoint ${String(value)}: not a loopback endpoint`,
      'give --endpoint http://127.0.0.1:PORT or http://[::1]:PORT (PORT 0: any free port); a host name such as localhost is not taken',
    );
  }
  return value;
}

/** `--digest`, when given: a SHA-256 hex digest as `leasehold recover` shows it. */
export function digestOption(value: Value, review: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !hash.safeParse(value).success) {
    throw new UsageError(
      `--digest ${String(value)}: not a digest (64 lowercase hex digits)`,
      `copy the digest ${review} shows, or run it to see the current one`,
    );
  }
  return value;
}

/** For options that only the etcd backend has: a usage error on a state home of the file backend. */
export function requireEtcd(backend: Backend, option: string): void {
  if (backend.kind !== 'etcd') {
    throw new UsageError(
      `${option}: only for a state home on the etcd backend (this one uses files)`,
      `leave out ${option}; it sets the etcd lease's time to live`,
    );
  }
}

const ETCD_OPTIONS_REMEDY =
  "give --etcd-endpoints the members' client URLs, comma-separated (http://HOST:2379 or https://HOST:2379), and --etcd-prefix a key prefix such as /leasehold/team; or neither, for the file backend";

/** The backend `init` is asked for: files, or etcd with both `--etcd-endpoints` and `--etcd-prefix`, each checked by the rule the state home applies. */
export function backendOption(endpoints: Value, prefix: Value): Backend {
  if (endpoints === undefined && prefix === undefined) return { kind: 'files' };
  if (typeof endpoints !== 'string' || typeof prefix !== 'string') {
    throw new UsageError(
      '--etcd-endpoints and --etcd-prefix: give both, or neither for the file backend',
      ETCD_OPTIONS_REMEDY,
    );
  }
  const decoded = safeDecode(
    backendSchema,
    { kind: 'etcd', endpoints: endpoints.split(','), prefix },
    '--etcd-endpoints/--etcd-prefix',
  );
  if (!decoded.success) throw new UsageError(decoded.error.message, ETCD_OPTIONS_REMEDY);
  return decoded.value;
}

/** `stop --ask [--reason TEXT]`: the hand-over request to send, or undefined without `--ask`. */
export function handOverOption(ask: Value, reason: Value): HandOverRequest | undefined {
  if (ask !== true) {
    if (reason === undefined) return undefined;
    throw new UsageError(
      '--reason: only with --ask (a stop gives the owner no say)',
      'add --ask to ask the owner to hand over, giving it your reason; or leave out --reason',
    );
  }
  if (reason === undefined) return {};
  const problem = handOverReasonProblem(reason);
  if (problem !== undefined) {
    throw new UsageError(
      `--reason: ${problem}`,
      'give --reason 1 to 200 printable characters, on one line (quote it in the shell)',
    );
  }
  return { reason: reason as string };
}

/** `--wait DURATION` in ms: `500ms`, `30s`, `5m`, or a number of seconds; undefined when not given. */
export function durationOption(value: Value, option: string): number | undefined {
  if (value === undefined) return undefined;
  const match = typeof value === 'string' ? /^([0-9]{1,9})(ms|s|m)?$/.exec(value) : null;
  if (match === null)
    throw new UsageError(
      `${option} ${String(value)}: not a duration`,
      `give ${option} a whole number of seconds, or one with ms, s or m, such as ${option} 30s`,
    );
  const unit = match[2] ?? 's';
  return Number(match[1]) * (unit === 'ms' ? 1 : unit === 's' ? 1000 : 60_000);
}

/**
 * `doctor --verify-fs [--processes N] [--seconds S]`: the verifier's numbers (undefined: its
 * defaults), or undefined without `--verify-fs`. Their range is the verifier's to judge.
 */
export function verifyFsOption(
  verify: Value,
  processes: Value,
  seconds: Value,
): { processes?: number; seconds?: number } | undefined {
  if (verify !== true) {
    const given = processes !== undefined ? '--processes' : seconds !== undefined ? '--seconds' : undefined;
    if (given === undefined) return undefined;
    throw new UsageError(`${given}: only with --verify-fs`, `add --verify-fs to race processes; or leave out ${given}`);
  }
  const counts = { processes: wholeNumber(processes, '--processes', 1), seconds: wholeNumber(seconds, '--seconds', 1) };
  return Object.fromEntries(Object.entries(counts).filter(([, count]) => count !== undefined));
}
