import { describe, expect, it } from 'vitest';
import { DecodedFiles } from './index.js';

describe('DecodedFiles', () => {
  it('decodes a file once per identity, and again when its identity changes', () => {
    const files = new DecodedFiles<{ n: number }>(4);
    let decodes = 0;
    const decode = (n: number) => () => {
      decodes += 1;
      return { n };
    };
    const first = files.get('/a', 'one', decode(1));
    expect(files.get('/a', 'one', decode(99))).toBe(first);
    expect(decodes).toBe(1);
    expect(files.get('/a', 'two', decode(2))).toEqual({ n: 2 });
    expect(decodes).toBe(2);
  });

  it('hands out values frozen all the way down, so no caller changes what another is handed', () => {
    const files = new DecodedFiles<{ rows: { root: string }[] }>(4);
    const value = files.set('/a', 'one', { rows: [{ root: '/w' }] });
    expect(Object.isFrozen(value)).toBe(true);
    expect(Object.isFrozen(value.rows)).toBe(true);
    expect(Object.isFrozen(value.rows[0])).toBe(true);
  });

  it('forgets the file stored longest ago beyond its limit', () => {
    const files = new DecodedFiles<string>(2);
    files.set('/a', 'one', 'a');
    files.set('/b', 'one', 'b');
    files.set('/c', 'one', 'c');
    expect(files.get('/a', 'one', () => 'decoded again')).toBe('decoded again');
    expect(files.get('/c', 'one', () => 'decoded again')).toBe('c');
  });
});
