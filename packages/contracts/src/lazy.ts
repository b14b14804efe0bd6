import { z } from 'zod';

// A program that loads this package decodes a few of its documents (`leasehold status` of a stopped
// workspace decodes four), yet it paid at import for building every schema: zod builds each schema,
// and each `.optional()`, `.refine()` and shape, as objects with internals of their own. So each
// exported schema is a stand-in that builds the real one on first use, and answers from it after.

const realOf = new WeakMap<object, () => object>();

/**
 * `build()`'s result, built on first use: any read, call, `in`, key listing or `instanceof`
 * through the returned stand-in builds it once and answers from it.
 */
export function lazy<T extends object>(build: () => T): T {
  let built: T | undefined;
  const real = (): T => (built ??= build());
  // Every trap answers from the real schema, with the real schema as receiver, so zod's members
  // (bound to their instance on first read) bind to it, never to the stand-in.
  const standIn = new Proxy({} as T, {
    get: (_, key) => Reflect.get(real(), key),
    set: (_, key, value) => Reflect.set(real(), key, value),
    has: (_, key) => Reflect.has(real(), key),
    deleteProperty: (_, key) => Reflect.deleteProperty(real(), key),
    ownKeys: () => Reflect.ownKeys(real()),
    // A stand-in may not report a property non-configurable that its own (empty) target lacks.
    getOwnPropertyDescriptor: (_, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(real(), key);
      return descriptor === undefined ? undefined : { ...descriptor, configurable: true };
    },
    getPrototypeOf: () => Reflect.getPrototypeOf(real()),
  });
  realOf.set(standIn, real);
  return standIn;
}

/**
 * The real schema behind a stand-in (built now), else `schema` itself. A schema built from others
 * holds their real schemas, so that a decode passes through a stand-in once, at its root, and not
 * once per member of every row.
 */
export function real<T extends object>(schema: T): T {
  return (realOf.get(schema)?.() ?? schema) as T;
}

/** `z.strictObject(shape)`, holding the real schema of each stand-in in `shape` (see `real`). */
export function strictObject<Shape extends z.core.$ZodLooseShape>(shape: Shape) {
  const members = Object.entries(shape).map(([key, schema]) => [key, real(schema as object)]);
  return z.strictObject(Object.fromEntries(members) as Shape);
}
