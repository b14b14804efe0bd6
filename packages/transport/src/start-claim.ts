import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import {
  ContractError,
  DOCUMENT_BYTES,
  START_CLAIM_MARKER_NAME,
  START_CLAIM_NAME,
  claimSchema,
  decodeBytes,
  encode,
  startClaimMarker,
  startClaimPlaces,
  type Claim,
  type StartClaimPlaces,
} from '@leasehold/contracts';
import {
  HolderFiles,
  PrivateFiles,
  currentProcess,
  type FileSnapshot,
  type OwnerStatus,
} from '@leasehold/private-files';

const CLAIM_SCHEMA = 'leasehold.start-claim/1';

/** `leasehold.start-claim/1`: the process that runs a workspace's `start`, and since when. Take-over markers hold the same document. */
const startClaimSchema = claimSchema(CLAIM_SCHEMA);

/**
 * The claim document in `bytes`. No live caller writes a malformed one, so it is refused, never
 * taken over: whoever wrote it may still act on it.
 * @throws ContractError `refused`, with the file as its `path`.
 */
function decodeClaim(path: string, bytes: Uint8Array): Claim {
  try {
    return decodeBytes(startClaimSchema, bytes, DOCUMENT_BYTES, path);
  } catch (error) {
    if (!ContractError.is(error, 'refused')) throw error;
    throw new ContractError('refused', `${error.message}; remove it once no start is under way`, {
      path,
      cause: error,
    });
  }
}

/** The maker of a claim held by another process, and what this host can tell of it (`live` or `ambiguous`). */
export interface ClaimHolder {
  readonly token: string;
  readonly pid: number;
  readonly host: string;
  readonly since: string;
  readonly verdict: OwnerStatus;
}

/**
 * What a claim attempt got: the claim (its snapshot, to release it; `tookOver` when it was a dead
 * maker's), or a wait (on its holder, when one could be read).
 */
type ClaimAttempt =
  | { readonly kind: 'won'; readonly held: FileSnapshot; readonly tookOver: boolean }
  | { readonly kind: 'wait'; readonly holder?: ClaimHolder };

/**
 * The start claim of one workspace in one state home, `<stateHome>/start-claims/<name>.json`,
 * `<name>` being the name of the workspace's private root (contracts' layout): at most one
 * process at a time runs the workspace's `start`. A claim is made by an exclusive create, taken
 * over only from a maker proved `absent` (pid and start time), never because it is old, and
 * removed by its maker.
 */
export class StartClaim {
  readonly #places: StartClaimPlaces;
  readonly #root: string;
  readonly #home: PrivateFiles;
  readonly #files: PrivateFiles;
  readonly #claims: HolderFiles<Claim>;

  /** @throws ContractError `refused` for a root or state home that is not absolute and normalised. */
  constructor(root: string, stateHome: string) {
    this.#places = startClaimPlaces(root, stateHome);
    this.#root = root;
    this.#home = new PrivateFiles(stateHome);
    this.#files = new PrivateFiles(this.#places.folder);
    this.#claims = new HolderFiles(this.#files, {
      decode: decodeClaim,
      markerOf: (token) => startClaimMarker(this.#places, token),
      // A taker that lost connects to the owner the winner started, and may never hold the claim: it removes its own marker.
      markerRemovedBy: 'taker',
    });
  }

  /**
   * Makes the claim for this process, or takes over one whose maker is proved dead; otherwise
   * says who holds it.
   * @throws ContractError `refused` (an unsafe folder or file, a malformed claim).
   */
  attempt(): ClaimAttempt {
    this.#home.directory(this.#places.folder, true);
    // A maker killed between the link and the unlink of its create left a second link: its claim
    // reads `refused` until its staged temp is gone.
    this.#files.sweepStaging();
    const bytes = encode({
      schema: CLAIM_SCHEMA,
      token: randomUUID(),
      ...currentProcess(),
      root: this.#root,
      since: new Date().toISOString(),
    });
    try {
      return { kind: 'won', held: this.#files.create(this.#places.claim, bytes), tookOver: false };
    } catch (error) {
      if (!ContractError.is(error, 'conflict')) throw error;
    }
    const found = this.#claims.judge(this.#places.claim);
    if (found.kind === 'held') {
      const { holder: claim, verdict } = found.found;
      return {
        kind: 'wait',
        holder: { token: claim.token, pid: claim.pid, host: claim.host, since: claim.since, verdict },
      };
    }
    if (found.kind !== 'dead') return { kind: 'wait' };
    const taken = this.#claims.takeOver(found, bytes);
    return taken === undefined ? { kind: 'wait' } : { kind: 'won', held: taken, tookOver: true };
  }

  /**
   * Removes this process's claim, and every take-over marker of this workspace first: while a live
   * maker holds the claim, each names a token no longer at the claim's place, so the take-over it
   * was for can only fail its compare. A claim no longer `held` is not ours to remove.
   * @throws ContractError `refused` (an unsafe folder or file).
   */
  release(held: FileSnapshot): void {
    const { folder, markerPrefix } = this.#places;
    for (const name of this.#files.entries(folder, [START_CLAIM_NAME, START_CLAIM_MARKER_NAME])) {
      if (!name.startsWith(markerPrefix)) continue;
      const marker = join(folder, name);
      try {
        const snapshot = this.#files.read(marker);
        if (snapshot !== undefined) this.#files.remove(marker, snapshot);
      } catch (error) {
        // A doomed take-over is writing or removing it: it removes its own marker.
        if (!ContractError.is(error, 'conflict')) throw error;
      }
    }
    this.#claims.removeIfUnchanged(this.#places.claim, held);
  }
}
