import {
  ContractError,
  DOCUMENT_BYTES,
  REGISTRY_BYTES,
  REGISTRY_ENTRIES,
  backendSchema,
  decode,
  decodeBytes,
  encode,
  registryFormatSchema,
  reservationTableSchema,
  type Backend,
  type RegistryFormat,
  type Reservation,
} from '@leasehold/contracts';
import { describeHolder, ownerStatus, type FileSnapshot } from '@leasehold/private-files';
import { rootsOverlap } from './roots-overlap.js';

/**
 * Checks the rules a list of reservations must keep: every entry of this
 * state home, no two overlapping roots, no shared endpoint.
 * @throws ContractError `refused`.
 */
export function validateEntries(entries: readonly Reservation[], stateHome: string, label: string): void {
  const endpoints = new Set<string>();
  entries.forEach((entry, index) => {
    if (entry.stateHome !== stateHome) throw new ContractError('refused', `${label}: entries[${index}] is of another state home`);
    if (endpoints.has(entry.endpoint)) throw new ContractError('refused', `${label}: entries[${index}] shares an endpoint`);
    endpoints.add(entry.endpoint);
  });
  // Sorted by `root + '/'`, every name between an ancestor and a descendant
  // starts with the ancestor's `root + '/'` too, so an overlap always shows
  // between neighbours: n log n rather than every pair.
  const order = entries.map((entry, index) => ({ key: `${entry.root === '/' ? '' : entry.root}/`, index }));
  order.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (let position = 1; position < order.length; position += 1) {
    const [first, second] = [order[position - 1]!.index, order[position]!.index].sort((a, b) => a - b) as [number, number];
    if (rootsOverlap(entries[first]!.root, entries[second]!.root)) {
      throw new ContractError('refused', `${label}: entries[${first}] and entries[${second}] have overlapping roots`);
    }
  }
}

/**
 * Refuses a new reservation that would overlap a row's root or share its
 * endpoint, then one that would not fit (`capacity`). A row is a fence: a
 * live owner's is `conflict` (wait for it, or stop it); one whose process is
 * gone (`absent`) or cannot be proved live (`ambiguous`) is `quarantine`,
 * naming that process, since only a recovery of its workspace frees it.
 * @throws ContractError `conflict`, `quarantine`, `capacity`.
 */
export function admitReservation(entries: readonly Reservation[], reservation: Reservation, label: string): void {
  const clash = entries.find((entry) => rootsOverlap(entry.root, reservation.root) || entry.endpoint === reservation.endpoint);
  if (clash !== undefined) {
    const what = rootsOverlap(clash.root, reservation.root) ? (clash.root === reservation.root ? 'this root' : `an overlapping root, ${clash.root}`) : `the same endpoint, for ${clash.root}`;
    const status = ownerStatus(clash.pid, clash.host, clash.processStart);
    const holder = describeHolder(clash, status);
    if (status === 'live') throw new ContractError('conflict', `${label}: another owner holds ${what}: ${holder}`);
    throw new ContractError('quarantine', `${label}: a crashed or unprovable owner still fences ${what}: ${holder}; its fences stay until its workspace is recovered`);
  }
  if (entries.length >= REGISTRY_ENTRIES) {
    throw new ContractError('capacity', `${label}: ${REGISTRY_ENTRIES} reservations already`);
  }
}

/** The decoded, validated reservations in a `roots.json` snapshot. */
export function decodeRoots(roots: FileSnapshot, stateHome: string, label: string): Reservation[] {
  const registry = decodeBytes(reservationTableSchema, roots.bytes, REGISTRY_BYTES, label);
  validateEntries(registry.entries, stateHome, label);
  return registry.entries;
}

/** The backend of a state home whose format document names none. */
export const FILE_BACKEND: Backend = Object.freeze({ kind: 'files' });

/** The decoded `format.json`; refuses one that is not this state home's. */
export function checkFormat(format: FileSnapshot, stateHome: string, label: string): RegistryFormat {
  const decoded = decodeBytes(registryFormatSchema, format.bytes, DOCUMENT_BYTES, label);
  if (decoded.stateHome !== stateHome) throw new ContractError('refused', `${label}: names another state home`);
  return decoded;
}

/** The backend a `format.json` records: the file backend when it names none. */
export function recordedBackend(format: FileSnapshot, stateHome: string, label: string): Backend {
  return checkFormat(format, stateHome, label).backend ?? FILE_BACKEND;
}

/**
 * `backend` checked against its schema (never trusted as typed: it may come from a flag or a file).
 * @throws ContractError `refused`.
 */
export function checkBackend(backend: Backend, label: string): Backend {
  return decode(backendSchema, backend, label);
}

/**
 * The bytes of `format.json` for a state home of `backend`. The file backend is
 * left out, so that its format document keeps the bytes it had before backends.
 * @throws ContractError `refused` for an invalid backend, or one whose document would pass DOCUMENT_BYTES.
 */
export function encodeFormat(stateHome: string, backend: Backend, label: string): Uint8Array {
  const recorded = backend.kind === 'files' ? {} : { backend };
  const format = decode(registryFormatSchema, { schema: 'leasehold.registry-format/1', stateHome, ...recorded }, label);
  const bytes = encode(format);
  if (bytes.byteLength > DOCUMENT_BYTES) {
    throw new ContractError('refused', `${label}: the format document of this backend would be larger than ${DOCUMENT_BYTES} bytes; use fewer or shorter endpoints`);
  }
  return bytes;
}

/**
 * The bytes of `roots.json` for `entries`, proven valid and within
 * REGISTRY_ENTRIES and REGISTRY_BYTES.
 * @throws ContractError `capacity` over a bound, `refused` for an invalid list.
 */
export function encodeEntries(entries: readonly Reservation[], stateHome: string, label: string): Uint8Array {
  if (entries.length > REGISTRY_ENTRIES) {
    throw new ContractError('capacity', `${label}: more than ${REGISTRY_ENTRIES} reservations`);
  }
  validateEntries(entries, stateHome, label);
  const registry = decode(reservationTableSchema, { schema: 'leasehold.registry/1', entries }, label);
  const bytes = encode(registry);
  if (bytes.byteLength > REGISTRY_BYTES) throw new ContractError('capacity', `${label}: larger than ${REGISTRY_BYTES} bytes`);
  return bytes;
}
