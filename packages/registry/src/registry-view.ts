import {
  ContractError,
  DOCUMENT_BYTES,
  DecodedFiles,
  REGISTRY_BYTES,
  REGISTRY_ENTRIES,
  backendSchema,
  decode,
  decodeBytes,
  encode,
  placeOptions,
  recoverRemedy,
  registryFormatSchema,
  reservationSchema,
  reservationTableSchema,
  shellQuote,
  type Backend,
  type RegistryFormat,
  type Reservation,
  type FileSystemAllowance,
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
    if (entry.stateHome !== stateHome)
      throw new ContractError('refused', `${label}: entries[${index}] is of another state home`);
    if (endpoints.has(entry.endpoint))
      throw new ContractError('refused', `${label}: entries[${index}] shares an endpoint`);
    endpoints.add(entry.endpoint);
  });
  // Sorted by `root + '/'`, every name between an ancestor and a descendant
  // starts with the ancestor's `root + '/'` too, so an overlap always shows
  // between neighbours: n log n rather than every pair.
  const order = entries.map((entry, index) => ({ key: `${entry.root === '/' ? '' : entry.root}/`, index }));
  order.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (let position = 1; position < order.length; position += 1) {
    const [first, second] = [order[position - 1]!.index, order[position]!.index].sort((a, b) => a - b) as [
      number,
      number,
    ];
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
  const clash = entries.find(
    (entry) => rootsOverlap(entry.root, reservation.root) || entry.endpoint === reservation.endpoint,
  );
  if (clash !== undefined) {
    const what = rootsOverlap(clash.root, reservation.root)
      ? clash.root === reservation.root
        ? 'this root'
        : `an overlapping root, ${clash.root}`
      : `the same endpoint, for ${clash.root}`;
    const status = ownerStatus(clash.pid, clash.host, clash.processStart);
    const holder = describeHolder(clash, status);
    if (status === 'live') {
      const place = placeOptions(clash.root, clash.stateHome);
      throw new ContractError('conflict', `${label}: another owner holds ${what}: ${holder}`, {
        remedy: `see it with \`leasehold status ${place}\` and every owner with \`leasehold list --state-home ${shellQuote(clash.stateHome)}\`; wait for it, or stop it with \`leasehold stop ${place}\``,
      });
    }
    const owner =
      status === 'absent' ? 'an owner whose process is gone' : 'an owner this host cannot tell live or gone';
    throw new ContractError(
      'quarantine',
      `${label}: ${owner} still fences ${what}: ${holder}; its fences stay until its workspace is recovered`,
      {
        remedy: recoverRemedy(clash.root, clash.stateHome, status),
      },
    );
  }
  if (entries.length >= REGISTRY_ENTRIES) {
    throw new ContractError('capacity', `${label}: ${REGISTRY_ENTRIES} reservations already`);
  }
}

// A few state homes per process at most are busy at once. Decoding and checking a table of 256 rows
// costs more than a cycle's fsyncs; a transaction records the table it wrote (`rememberRoots`), so
// neither its next transaction nor a reader of this process decodes it again.
const DECODED_FILES = 32;
const decodedTables = new DecodedFiles<readonly Reservation[]>(DECODED_FILES);
const decodedFormats = new DecodedFiles<RegistryFormat>(DECODED_FILES);

/** The decoded, validated reservations in a `roots.json` snapshot (frozen). */
export function decodeRoots(roots: FileSnapshot, stateHome: string, label: string): readonly Reservation[] {
  return decodedTables.get(label, roots.identity, () => {
    const registry = decodeBytes(reservationTableSchema, roots.bytes, REGISTRY_BYTES, label);
    validateEntries(registry.entries, stateHome, label);
    return registry.entries;
  });
}

/** Records the rows a transaction just wrote as the table of the `roots.json` snapshot it wrote. */
export function rememberRoots(
  roots: FileSnapshot,
  entries: readonly Reservation[],
  label: string,
): readonly Reservation[] {
  return decodedTables.set(label, roots.identity, entries);
}

/** The backend of a state home whose format document names none. */
export const FILE_BACKEND: Backend = Object.freeze({ kind: 'files' });

/** The decoded `format.json`; refuses one that is not this state home's. */
export function checkFormat(format: FileSnapshot, stateHome: string, label: string): RegistryFormat {
  const decoded = decodedFormats.get(label, format.identity, () =>
    decodeBytes(registryFormatSchema, format.bytes, DOCUMENT_BYTES, label),
  );
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
export function encodeFormat(
  stateHome: string,
  backend: Backend,
  label: string,
  allowedFileSystem?: FileSystemAllowance,
): Uint8Array {
  const recorded = {
    ...(backend.kind === 'files' ? {} : { backend }),
    ...(allowedFileSystem === undefined ? {} : { allowedFileSystem }),
  };
  const format = decode(registryFormatSchema, { schema: 'leasehold.registry-format/1', stateHome, ...recorded }, label);
  const bytes = encode(format);
  if (bytes.byteLength > DOCUMENT_BYTES) {
    throw new ContractError(
      'refused',
      `${label}: the format document of this backend would be larger than ${DOCUMENT_BYTES} bytes; use fewer or shorter endpoints`,
    );
  }
  return bytes;
}

/**
 * A new row checked on its own, before it joins rows already valid: its shape, and this state home.
 * @throws ContractError `refused`.
 */
export function checkedRow(reservation: Reservation, stateHome: string, label: string): Reservation {
  const row = decode(reservationSchema, reservation, `${label}: the new reservation`);
  if (row.stateHome !== stateHome)
    throw new ContractError('refused', `${label}: the new reservation is of another state home`);
  return row;
}

/**
 * The bytes of `roots.json` for rows already valid together (decoded from a table, or a row that
 * `checkedRow` and `admitReservation` let in), within REGISTRY_ENTRIES and REGISTRY_BYTES. Nothing
 * is decoded again: a write costs its canonical text, not a check of every row.
 * @throws ContractError `capacity` over a bound.
 */
export function encodeTable(entries: readonly Reservation[], label: string): Uint8Array {
  if (entries.length > REGISTRY_ENTRIES) {
    throw new ContractError('capacity', `${label}: more than ${REGISTRY_ENTRIES} reservations`);
  }
  const bytes = encode({ schema: 'leasehold.registry/1', entries });
  if (bytes.byteLength > REGISTRY_BYTES)
    throw new ContractError('capacity', `${label}: larger than ${REGISTRY_BYTES} bytes`);
  return bytes;
}
