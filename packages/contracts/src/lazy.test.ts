import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { lazy, real, strictObject } from './lazy.js';

describe('lazy', () => {
  it('builds nothing until first use, then builds once', () => {
    let builds = 0;
    const schema = lazy(() => {
      builds += 1;
      return z.string().max(3);
    });
    expect(builds).toBe(0);
    expect(schema.safeParse('abc').success).toBe(true);
    expect(schema.safeParse('abcd').success).toBe(false);
    expect(builds).toBe(1);
  });

  it('answers as the real schema: instanceof, keys, its methods', () => {
    const schema = lazy(() => z.strictObject({ a: z.int() }));
    expect(schema).toBeInstanceOf(z.ZodObject);
    expect(Object.keys(schema.shape)).toEqual(['a']);
    const parse = (value: unknown) => schema.parse(value);
    expect(parse({ a: 1 })).toEqual({ a: 1 });
    expect(schema.optional().safeParse(undefined).success).toBe(true);
  });

  it('real() gives the built schema behind a stand-in, and any other value itself', () => {
    const inner = z.string();
    const schema = lazy(() => inner);
    expect(real(schema)).toBe(inner);
    expect(real(inner)).toBe(inner);
  });

  it('strictObject holds the real schemas of its stand-in members', () => {
    const inner = z.string();
    const object = strictObject({ name: lazy(() => inner) });
    expect(object.shape.name).toBe(inner);
    expect(object.safeParse({ name: 'x', other: 1 }).success).toBe(false);
  });
});
