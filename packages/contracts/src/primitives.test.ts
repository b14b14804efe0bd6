import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { codeOf } from '../test/helpers.js';
import { decode } from './codec.js';
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

/** Table-driven bounds: every `accepted` value decodes to itself, every `refused` one is `refused`. */
function bounds(schema: z.ZodType, accepted: readonly unknown[], refused: readonly unknown[]): void {
  for (const value of accepted) {
    expect(decode(schema, value), String(value)).toBe(value);
  }
  for (const value of refused) {
    expect(
      codeOf(() => decode(schema, value)),
      String(value),
    ).toBe('refused');
  }
}

const NOT_STRINGS = [null, 1, true, [], {}, undefined];

describe('text', () => {
  it('accepts up to max characters and refuses max + 1', () => {
    bounds(text(5), ['', 'a', 'abcde'], ['abcdef', ...NOT_STRINGS]);
    bounds(text(0), [''], ['a']);
  });

  // zod measures strings in Unicode code points (a lone surrogate counts as one), so a
  // bound limits characters, not UTF-16 units and not bytes. Pinned here because it is
  // zod's rule, not ours: a zod upgrade that changed it would change every bound.
  it('counts Unicode code points, not UTF-16 units', () => {
    bounds(text(4), ['😀😀😀😀', 'a😀b😀'], ['😀😀😀😀a', '\ud800'.repeat(5)]);
    bounds(text(4), ['\ud800'.repeat(4), '\udc00\ud800'.repeat(2)], []);
  });

  it('refuses a NUL anywhere', () => {
    bounds(text(10), ['a\u0001b'], ['\0', 'a\0', '\0a', 'a\0b']);
  });

  it('refuses the empty string only with nonEmpty', () => {
    bounds(text(3, { nonEmpty: true }), ['a', 'abc'], ['', 'abcd', 'a\0']);
    bounds(text(3, { nonEmpty: false }), [''], []);
  });
});

describe('absolutePath', () => {
  it('accepts the root and normalised absolute paths', () => {
    bounds(absolutePath, ['/', '/a', '/a/b', '/a b/c.d/..e/.f/g..', '/é/😀', '/a\nb'], []);
  });

  it('refuses relative, unnormalised and empty paths', () => {
    bounds(
      absolutePath,
      [],
      [
        '',
        'a',
        'a/b',
        './a',
        '/a/',
        '//',
        '//a',
        '/a//b',
        '/./a',
        '/a/./b',
        '/a/.',
        '/a/../b',
        '/a/..',
        '/..',
        '/a\0b',
        ...NOT_STRINGS,
      ],
    );
  });

  it('accepts 4096 characters and refuses 4097', () => {
    bounds(
      absolutePath,
      ['/' + 'a'.repeat(4095), `/${'a'.repeat(2047)}/${'b'.repeat(2047)}`],
      ['/' + 'a'.repeat(4096)],
    );
    bounds(absolutePath, ['/' + '😀'.repeat(4095)], ['/' + '😀'.repeat(4096)]);
  });
});

describe('hash', () => {
  const digest = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

  it('accepts 64 lowercase hex digits', () => {
    bounds(hash, [digest, '0'.repeat(64), 'f'.repeat(64)], []);
  });

  it('refuses uppercase, a wrong length and other characters', () => {
    bounds(
      hash,
      [],
      [
        digest.toUpperCase(),
        'E' + digest.slice(1),
        digest.slice(1),
        digest + '0',
        `${digest}\n`,
        'g'.repeat(64),
        '',
        ...NOT_STRINGS,
      ],
    );
  });
});

describe('id', () => {
  const uuid = '0f8fad5b-d9cb-469f-a165-70867728950e';

  it('accepts a lowercase UUID', () => {
    bounds(id, [uuid, '00000000-0000-0000-0000-000000000000'], []);
  });

  it('refuses uppercase, a wrong grouping and other shapes', () => {
    bounds(
      id,
      [],
      [
        uuid.toUpperCase(),
        '0F8fad5b-d9cb-469f-a165-70867728950e',
        '0f8fad5bd9cb469fa16570867728950e',
        '0f8fad5b-d9cb469f-a165-70867728950e',
        '0f8fad5-bd9cb-469f-a165-70867728950e',
        '0f8fad5b-d9cb-469f-a165-70867728950',
        '0f8fad5b-d9cb-469f-a165-70867728950e0',
        '{0f8fad5b-d9cb-469f-a165-70867728950e}',
        '0f8fad5b-d9cb-469f-a165-70867728950g',
        `${uuid}\n`,
        '',
        ...NOT_STRINGS,
      ],
    );
  });
});

describe('capabilityToken', () => {
  const token = Buffer.alloc(32, 0xfb).toString('base64url');

  it('accepts 43 characters of base64url', () => {
    expect(token).toHaveLength(43);
    bounds(capabilityToken, [token, 'A'.repeat(43), `${'-'.repeat(21)}${'_'.repeat(22)}`, 'z0'.repeat(21) + '9'], []);
  });

  it('refuses 42 and 44 characters, padding and the base64 (non-url) alphabet', () => {
    bounds(
      capabilityToken,
      [],
      [
        token.slice(1),
        token + 'A',
        `${token.slice(1)}=`,
        `${token}=`,
        `+${token.slice(1)}`,
        `/${token.slice(1)}`,
        `${token.slice(1)}.`,
        ` ${token.slice(1)}`,
        `${token}\n`,
        '',
        ...NOT_STRINGS,
      ],
    );
  });
});

describe('pid', () => {
  it('accepts 1 and 2^31 - 1', () => {
    bounds(pid, [1, 4242, 2 ** 31 - 1], []);
  });

  it('refuses 0, 2^31, fractions, negatives, strings and non-finite numbers', () => {
    bounds(
      pid,
      [],
      [0, -0, 2 ** 31, 1.5, -1, '1', 1n, Number.NaN, Number.POSITIVE_INFINITY, null, true, [], {}, undefined],
    );
  });
});

describe('host', () => {
  it('accepts 1 and 255 characters', () => {
    bounds(host, ['h', 'h'.repeat(255), 'build-01.example'], []);
  });

  it('refuses the empty string, 256 characters and a NUL', () => {
    bounds(host, [], ['', 'h'.repeat(256), 'a\0b', ...NOT_STRINGS]);
  });
});

describe('processStart', () => {
  it('accepts 1 and 128 characters', () => {
    bounds(processStart, ['s', 's'.repeat(128)], []);
  });

  it('refuses 129 characters, the empty string and a NUL', () => {
    bounds(processStart, [], ['s'.repeat(129), '', 'a\0', ...NOT_STRINGS]);
  });
});

describe('endpoint and anyPortEndpoint', () => {
  const concrete = [
    'http://127.0.0.1:1',
    'http://127.0.0.1:80',
    'http://127.0.0.1:8080',
    'http://127.0.0.1:65535',
    'http://[::1]:1',
    'http://[::1]:8080',
    'http://[::1]:65535',
  ];
  const neither = [
    'http://127.0.0.1:080',
    'http://127.0.0.1:00',
    'http://127.0.0.1:01',
    'http://[::1]:00',
    'http://127.0.0.1:65536',
    'http://127.0.0.1:99999',
    'http://127.0.0.1:100000',
    'http://127.0.0.1:-1',
    'http://127.0.0.1:+80',
    'http://127.0.0.1:8O',
    'http://127.0.0.1: 80',
    'http://127.0.0.1:',
    'http://127.0.0.1',
    'http://[::1]',
    'http://localhost:80',
    'https://127.0.0.1:80',
    'HTTP://127.0.0.1:80',
    'http://127.0.0.1:80/',
    'http://127.0.0.1:80/v1',
    'http://127.0.0.1:80?',
    'http://127.0.0.1:80#',
    'http://user@127.0.0.1:80',
    ' http://127.0.0.1:80',
    'http://127.0.0.1:80\n',
    'http://127.0.0.2:80',
    'http://127.1:80',
    'http://0.0.0.0:80',
    'http://[0:0:0:0:0:0:0:1]:80',
    'http://[::ffff:127.0.0.1]:80',
    'http://[::1%lo]:80',
    'http://::1:80',
    'http://[::2]:80',
    '127.0.0.1:80',
    '',
    ...NOT_STRINGS,
  ];

  it('endpoint accepts loopback with ports 1 to 65535', () => {
    bounds(endpoint, concrete, []);
  });

  it('endpoint refuses port 0, leading zeros, other hosts, schemes and shapes', () => {
    bounds(endpoint, [], ['http://127.0.0.1:0', 'http://[::1]:0', ...neither]);
  });

  it('anyPortEndpoint also accepts port 0, and nothing else more', () => {
    bounds(anyPortEndpoint, ['http://127.0.0.1:0', 'http://[::1]:0', ...concrete], neither);
  });
});
