import { ContractError } from './contract-error.js';
import { formatPath, type PathSegment } from './json-path.js';

/** Deepest nesting of objects and arrays that `parse` accepts. */
export const MAX_DEPTH = 64;

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

/**
 * A strict RFC 8259 parser. `JSON.parse` keeps the last of two equal keys, and
 * another reader may keep the first: that parser differential lets one file
 * mean two things, so duplicate keys are refused at every depth. Objects are
 * built with defineProperty, so a `__proto__` key is an own key like any other.
 */
export function parseJsonText(source: string, label: string): unknown {
  let index = 0;
  const path: PathSegment[] = [];

  const fail = (problem: string): never => {
    throw new ContractError('refused', `${label}: ${problem} at ${formatPath(path)} (offset ${index})`);
  };

  const skipWhitespace = () => {
    while (index < source.length) {
      const char = source.charCodeAt(index);
      if (char !== 0x20 && char !== 0x09 && char !== 0x0a && char !== 0x0d) return;
      index += 1;
    }
  };

  const expect = (char: string) => {
    if (source[index] !== char) fail('invalid JSON');
    index += 1;
  };

  const parseString = (): string => {
    expect('"');
    let result = '';
    let start = index;
    for (;;) {
      if (index >= source.length) fail('unterminated string');
      const char = source[index]!;
      if (char === '"') break;
      if (char.charCodeAt(0) < 0x20) fail('control character in string');
      if (char !== '\\') {
        index += 1;
        continue;
      }
      result += source.slice(start, index);
      const escape = source[index + 1] ?? '';
      if (escape === 'u') {
        const hex = source.slice(index + 2, index + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('invalid escape');
        result += String.fromCharCode(parseInt(hex, 16));
        index += 6;
      } else {
        const decoded = ESCAPES[escape];
        if (decoded === undefined) fail('invalid escape');
        result += decoded;
        index += 2;
      }
      start = index;
    }
    result += source.slice(start, index);
    index += 1;
    return result;
  };

  const parseNumber = (): number => {
    NUMBER.lastIndex = index;
    const match = NUMBER.exec(source);
    if (match === null) return fail('invalid JSON');
    index += match[0].length;
    const value = Number(match[0]);
    if (!Number.isFinite(value)) fail('number out of range');
    return value;
  };

  const parseLiteral = <T>(word: string, value: T): T => {
    if (!source.startsWith(word, index)) fail('invalid JSON');
    index += word.length;
    return value;
  };

  const parseObject = (): Record<string, unknown> => {
    expect('{');
    const result: Record<string, unknown> = {};
    const seen = new Set<string>();
    skipWhitespace();
    if (source[index] === '}') {
      index += 1;
      return result;
    }
    for (;;) {
      skipWhitespace();
      const key = parseString();
      path.push(key);
      if (seen.has(key)) fail('duplicate key');
      seen.add(key);
      skipWhitespace();
      expect(':');
      const value = parseValue();
      Object.defineProperty(result, key, { value, enumerable: true, writable: true, configurable: true });
      path.pop();
      skipWhitespace();
      if (source[index] === '}') {
        index += 1;
        return result;
      }
      expect(',');
    }
  };

  const parseArray = (): unknown[] => {
    expect('[');
    const result: unknown[] = [];
    skipWhitespace();
    if (source[index] === ']') {
      index += 1;
      return result;
    }
    for (;;) {
      path.push(result.length);
      result.push(parseValue());
      path.pop();
      skipWhitespace();
      if (source[index] === ']') {
        index += 1;
        return result;
      }
      expect(',');
    }
  };

  let depth = 0;
  const parseNested = <T>(parse: () => T): T => {
    depth += 1;
    if (depth > MAX_DEPTH) fail(`nesting deeper than ${MAX_DEPTH}`);
    const value = parse();
    depth -= 1;
    return value;
  };

  const parseValue = (): unknown => {
    skipWhitespace();
    switch (source[index]) {
      case '{':
        return parseNested(parseObject);
      case '[':
        return parseNested(parseArray);
      case '"':
        return parseString();
      case 't':
        return parseLiteral('true', true);
      case 'f':
        return parseLiteral('false', false);
      case 'n':
        return parseLiteral('null', null);
      default:
        return parseNumber();
    }
  };

  const value = parseValue();
  skipWhitespace();
  if (index !== source.length) fail('unexpected content after the document');
  return value;
}
