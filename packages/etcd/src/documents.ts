import { z } from 'zod';
import {
  ContractError,
  PATHS_DOCUMENT_BYTES,
  absolutePath,
  automaticRecoverySchema,
  decodeBytes,
  encode,
  endpoint,
  hash,
  host,
  id,
  pid,
  processStart,
  text,
} from '@leasehold/contracts';

/** The bound of every record Leasehold keeps in etcd (a root may be 4096 characters long). */
export const RECORD_BYTES = PATHS_DOCUMENT_BYTES;

/** The phases an owner key can carry; a released owner has no key at all. */
const OWNER_PHASES = ['idle', 'stopping', 'quarantined'] as const;
export type OwnerPhase = (typeof OWNER_PHASES)[number];

/** An int64 revision or lease id as etcd gives it: decimal, no sign, no leading zero. */
const revision = z.string().regex(/^(0|[1-9][0-9]{0,18})$/, { message: 'not a revision' });

const holder = {
  root: absolutePath,
  epoch: id,
  host,
  pid,
  processStart: processStart.optional(),
  endpoint,
};

/** The durable fence of a root: who took it. No lease: only recovery removes it. */
export const fenceRecordSchema = z.strictObject({ schema: z.literal('leasehold.etcd-fence/1'), ...holder });
export type FenceRecord = z.infer<typeof fenceRecordSchema>;

/** The owner key of a root, on the owner's lease: who holds it now and in which phase. */
export const ownerRecordSchema = z.strictObject({
  schema: z.literal('leasehold.etcd-owner/1'),
  ...holder,
  phase: z.enum(OWNER_PHASES),
});
export type OwnerRecord = z.infer<typeof ownerRecordSchema>;

/** The endpoint key of a host's endpoint, on the owner's lease. */
export const endpointRecordSchema = z.strictObject({
  schema: z.literal('leasehold.etcd-endpoint/1'),
  root: absolutePath,
  epoch: id,
  host,
  endpoint,
});

/**
 * `leasehold.etcd-recovery/1`, one journalled recovery in etcd (as contracts' `RecoveryRecord` is in
 * a state home's files): who removed which fence, when, against which digest. No secret.
 */
export const etcdRecoveryRecordSchema = z.strictObject({
  schema: z.literal('leasehold.etcd-recovery/1'),
  id,
  root: absolutePath,
  digest: hash,
  /** The digest the operator reviewed, when this recovery was part of a wider one (the etcd backend's, over a host's files). */
  reviewedDigest: hash.optional(),
  recordedAt: z.iso.datetime(),
  operator: z.strictObject({ pid, host, user: text(256, { nonEmpty: true }) }),
  fence: fenceRecordSchema,
  fenceRevision: revision,
  /** Only for a recovery no person confirmed: which processes were proved gone, and how. */
  automatic: automaticRecoverySchema.optional(),
});
export type EtcdRecoveryRecord = z.infer<typeof etcdRecoveryRecordSchema>;

/** A record's canonical bytes, checked against its bound before anything is sent. */
export function recordBytes(record: object): Uint8Array {
  const bytes = encode(record);
  if (bytes.byteLength > RECORD_BYTES)
    throw new ContractError('refused', `a record of ${bytes.byteLength} bytes passes the bound of ${RECORD_BYTES}`);
  return bytes;
}

/** Strictly decodes a value read from etcd (`refused` for anything malformed, naming the key). */
export function decodeRecord<Schema extends z.ZodType>(
  schema: Schema,
  bytes: Uint8Array,
  key: string,
): z.output<Schema> {
  return decodeBytes(schema, bytes, RECORD_BYTES, `etcd key ${key}`);
}

/** The newest fencing token a resource admitted (a `Sequencer`), kept by a fencing gate. */
export const admittedTokenSchema = z.strictObject({
  schema: z.literal('leasehold.fencing-token/1'),
  root: absolutePath,
  cluster: text(64, { nonEmpty: true }),
  revision,
});
export type AdmittedToken = z.infer<typeof admittedTokenSchema>;
