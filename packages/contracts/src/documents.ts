import { z } from 'zod';
import { backendSchema, etcdPrefix } from './backend.js';
import {
  absolutePath,
  anyPortEndpoint,
  capabilityToken,
  endpoint,
  hash,
  host,
  id,
  pid,
  processStart,
  text,
} from './primitives.js';
import { lazy, real, strictObject } from './lazy.js';

/** Default bound of one document in bytes. */
export const DOCUMENT_BYTES = 8192;
/** Bound of a document that carries two paths (each up to 4096 characters). */
export const PATHS_DOCUMENT_BYTES = 32768;
/** Most reservations one registry holds. */
export const REGISTRY_ENTRIES = 256;
/** Largest `roots.json` in bytes. */
export const REGISTRY_BYTES = 4194304;
/** Most fences one recovery record names. */
export const RECOVERY_RECORD_FENCES = 64;

// A function, not a shared object: its `.optional()` would build `processStart` at import.
const reservationShape = () => ({
  root: absolutePath,
  stateHome: absolutePath,
  configIdentity: hash,
  endpoint,
  epoch: id,
  pid,
  host,
  processStart: processStart.optional(),
  ownerToken: id,
});

/**
 * A file system whose guarantees are not proven, that a state home was allowed on once a verifier
 * passed there: by its name and its `statfs` magic number.
 */
export const fileSystemAllowanceSchema = lazy(() =>
  strictObject({
    name: text(64, { nonEmpty: true }),
    magic: z.number().int().min(0).max(0xffffffff),
  }),
);
export type FileSystemAllowance = z.infer<typeof fileSystemAllowanceSchema>;

/** `leasehold.registry-format/1`: marks a folder as one state home's registry. */
export const registryFormatSchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.registry-format/1'),
    stateHome: absolutePath,
    /** The backend this state home uses; absent for the file backend. */
    backend: backendSchema.optional(),
    /** The file system it was allowed on, when that one is not proven (`leasehold init --allow-fs`). */
    allowedFileSystem: real(fileSystemAllowanceSchema).optional(),
  }),
);
export type RegistryFormat = z.infer<typeof registryFormatSchema>;

/** One owner's claim on a root and an endpoint, as the registry lists it. */
export const reservationSchema = lazy(() => strictObject(reservationShape()));
export type Reservation = z.infer<typeof reservationSchema>;

/** `leasehold.registry/1`, the reservation table (`roots.json`): every reservation of a state home. */
export const reservationTableSchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.registry/1'),
    entries: z.array(real(reservationSchema)).max(REGISTRY_ENTRIES),
  }),
);
export type ReservationTable = z.infer<typeof reservationTableSchema>;

/**
 * `leasehold.registry-lock/1`: the short lock of one registry transaction,
 * naming its holder and the workspace root the transaction is for.
 */
export const registryLockSchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.registry-lock/1'),
    token: id,
    pid,
    host,
    processStart: processStart.optional(),
    root: absolutePath,
  }),
);
export type RegistryLock = z.infer<typeof registryLockSchema>;

/** `leasehold.service-format/1`: binds a service folder to its root, state home and config. */
export const serviceFormatSchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.service-format/1'),
    root: absolutePath,
    stateHome: absolutePath,
    configIdentity: hash,
  }),
);
export type ServiceFormat = z.infer<typeof serviceFormatSchema>;

/** `leasehold.owner-config/1`: what the service asks for. */
export const ownerConfigSchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.owner-config/1'),
    endpoint: anyPortEndpoint,
    policyIdentity: hash,
  }),
);
export type OwnerConfig = z.infer<typeof ownerConfigSchema>;

/** The phases of a registration. */
export const PHASES = ['idle', 'stopping', 'quarantined', 'stopped'] as const;
export type Phase = (typeof PHASES)[number];

/** `leasehold.registration/1`: the owner's own record of its reservation and phase. */
export const registrationSchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.registration/1'),
    ...reservationShape(),
    checkoutToken: id,
    phase: z.enum(PHASES),
    // 1 when the owner first writes it, one more with each write after (each phase, the release's
    // `stopped`): a reader that sees 3 after 1 knows it missed a phase (`Ownership.watch`).
    version: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  }),
);
export type Registration = z.infer<typeof registrationSchema>;

/** `leasehold.owner-lock/1`: held by the live owner of one epoch. */
export const ownerLockSchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.owner-lock/1'),
    epoch: id,
    token: id,
    pid,
    host,
  }),
);
export type OwnerLock = z.infer<typeof ownerLockSchema>;

/** `leasehold.local-capability/1`: the one secret; lives only in its 0600 file. */
export const localCapabilitySchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.local-capability/1'),
    epoch: id,
    capability: capabilityToken,
  }),
);
export type LocalCapability = z.infer<typeof localCapabilitySchema>;

/** `leasehold.checkout-lock/1`: the plain single-writer lock of a workspace. */
export const checkoutLockSchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.checkout-lock/1'),
    token: id,
    pid,
    host,
    processStart: processStart.optional(),
  }),
);
export type CheckoutLock = z.infer<typeof checkoutLockSchema>;

/**
 * `leasehold.companion/1`: a second process of one owner's epoch (a child that acts in the
 * workspace), which fences it with the owner until that process is gone.
 */
export const companionSchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.companion/1'),
    epoch: id,
    pid,
    host,
    processStart: processStart.optional(),
  }),
);
export type Companion = z.infer<typeof companionSchema>;

/**
 * `leasehold.folder-mark/1`: the folder's own fence (`<root>/.leasehold/owner.json`), which names
 * the ownership that holds the folder whatever the state home: the state home and backend it was
 * acquired through, the epoch, and the owning process. No secret. Read as untrusted input: the
 * workspace folder is the user's, not private.
 */
export const folderMarkSchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.folder-mark/1'),
    root: absolutePath,
    stateHome: absolutePath,
    backend: z.enum(['files', 'etcd']),
    /** For the etcd backend: its key prefix, which names one ownership across every host of the cluster. */
    prefix: etcdPrefix.optional(),
    epoch: id,
    pid,
    host,
    processStart: processStart.optional(),
  }),
);
export type FolderMark = z.infer<typeof folderMarkSchema>;

/** The process a fence names. */
export const holderSchema = lazy(() => strictObject({ pid, host, processStart: processStart.optional() }));
export type Holder = z.infer<typeof holderSchema>;

/**
 * One process's claim on one workspace, tagged `tag`: the start claim of `connectOrStart`
 * (`leasehold.start-claim/1`) and a waiter's ticket (`leasehold.wait-ticket/1`) are both this
 * document `{ schema, token, pid, host, processStart?, root, since }`. Built on first use, as every
 * schema here is.
 */
export function claimSchema(tag: string) {
  return lazy(() =>
    real(holderSchema).extend({
      schema: text(64).refine((value) => value === tag, { message: `not ${tag}` }),
      token: id,
      root: absolutePath,
      since: text(64, { nonEmpty: true }).refine((value) => !Number.isNaN(Date.parse(value)), {
        message: 'not an ISO 8601 time',
      }),
    }),
  );
}
export type Claim = z.infer<ReturnType<typeof claimSchema>>;

/** The kinds of file that can fence a workspace (keep it from a new owner until a recovery). */
export const FENCE_KINDS = [
  'registry-row',
  'registry-initialisation',
  'service-format',
  'service-config',
  'registration',
  'owner-lock',
  'capability',
  'checkout-lock',
  'companion',
  'folder-mark',
] as const;
export type FenceKind = (typeof FENCE_KINDS)[number];

/** A fence as a recovery record names it: kind, file and holder, never a secret. */
export const fenceSchema = lazy(() =>
  strictObject({
    kind: z.enum(FENCE_KINDS),
    path: absolutePath,
    holder: holderSchema.optional(),
  }),
);
export type Fence = z.infer<typeof fenceSchema>;

/**
 * What an automatic recovery (one a starting owner ran itself, with no person) proved: each
 * process the fences named is gone from this host, by its pid and recorded start time (another
 * boot, or the pid free or reused) or, for a holder recorded without a start time, by its pid alone.
 */
export const automaticRecoverySchema = lazy(() =>
  strictObject({
    reason: z.literal('owner-proved-dead'),
    proved: z
      .array(strictObject({ holder: holderSchema, by: z.enum(['pid-and-start-time', 'pid']) }))
      .max(RECOVERY_RECORD_FENCES),
  }),
);
export type AutomaticRecovery = z.infer<typeof automaticRecoverySchema>;

/**
 * `leasehold.recovery-record/1`: the journal's durable account of one recovery. `automatic` is
 * there only for a recovery no person confirmed (a reader older than it refuses such a record).
 */
export const recoveryRecordSchema = lazy(() =>
  strictObject({
    schema: z.literal('leasehold.recovery-record/1'),
    root: absolutePath,
    digest: hash,
    recordedAt: z.iso.datetime(),
    operator: strictObject({ pid, host, user: text(256, { nonEmpty: true }) }),
    fences: z.array(real(fenceSchema)).max(RECOVERY_RECORD_FENCES),
    automatic: automaticRecoverySchema.optional(),
  }),
);
export type RecoveryRecord = z.infer<typeof recoveryRecordSchema>;
