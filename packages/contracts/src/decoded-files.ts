/**
 * The last value each file (by path) was decoded to in this process, by its
 * identity, the SHA-256 of its bytes: the same identity is the same bytes, so
 * the same, already checked value. A reader still reads and hashes the bytes
 * on every access; only the parse and the schema's checks are skipped for a
 * file that did not change, which is most of what a read costs beyond its
 * system calls. Values are frozen, deeply, so that no caller changes what
 * another is handed. Beyond `limit` files, the one stored longest ago is
 * forgotten first.
 */
export class DecodedFiles<T> {
  readonly #byPath = new Map<string, { readonly identity: string; readonly value: T }>();
  readonly #limit: number;

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** The value of `path` at `identity`: the one stored, or `decode()`'s, stored now. */
  get(path: string, identity: string, decode: () => T): T {
    const known = this.#byPath.get(path);
    if (known?.identity === identity) return known.value;
    return this.set(path, identity, decode());
  }

  /** Stores `value` (frozen) as the value of `path` at `identity`, and answers it. */
  set(path: string, identity: string, value: T): T {
    this.#byPath.delete(path);
    this.#byPath.set(path, { identity, value: frozen(value) });
    if (this.#byPath.size > this.#limit) this.#byPath.delete(this.#byPath.keys().next().value!);
    return value;
  }
}

/** `value` and every object and array in it frozen (a decoded document holds nothing else). */
function frozen<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) frozen(inner);
    Object.freeze(value);
  }
  return value;
}
