import { describe, expect, it } from 'vitest';
import type * as ContractErrorModule from './contract-error.js';
import { CONTRACT_ERROR_CODES, ContractError, type ContractErrorCode } from './contract-error.js';

// The built package and the source module are two separate module instances,
// which is what two installed copies of @leasehold/contracts look like at run time.
// The path is computed so that type checking does not depend on a build.
async function builtCopy(): Promise<typeof ContractErrorModule.ContractError> {
  const url = new URL('../dist/index.js', import.meta.url).href;
  return ((await import(url)) as typeof ContractErrorModule).ContractError;
}

describe('ContractError', () => {
  it('carries its code, its name and its message', () => {
    const error = new ContractError('conflict', 'registry: another owner');
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe('conflict');
    expect(error.name).toBe('ContractError');
    expect(error.message).toBe('registry: another owner');
    expect(String(error)).toBe('ContractError: registry: another owner');
  });

  it('passes the cause through, and has none when none is given', () => {
    const cause = new Error('EACCES');
    expect(new ContractError('refused', 'unsafe file', { cause }).cause).toBe(cause);
    expect(Object.hasOwn(new ContractError('refused', 'unsafe file'), 'cause')).toBe(false);
  });

  it('carries the path it is about, next to the cause, and has none when none is given', () => {
    const cause = new Error('EACCES');
    const error = new ContractError('refused', '/state/v1/registry/roots.json: unsafe file', {
      path: '/state/v1/registry/roots.json',
      cause,
    });
    expect(error.path).toBe('/state/v1/registry/roots.json');
    expect(error.cause).toBe(cause);
    expect(error.message).toBe('/state/v1/registry/roots.json: unsafe file');
    const withoutCause = new ContractError('conflict', 'a: changed', { path: '/a' });
    expect(withoutCause.path).toBe('/a');
    expect(Object.hasOwn(withoutCause, 'cause')).toBe(false);
    const withoutPath = new ContractError('refused', 'unsafe file', { cause });
    expect(withoutPath.path).toBeUndefined();
    expect(Object.hasOwn(withoutPath, 'path')).toBe(false);
    expect(Object.hasOwn(new ContractError('refused', 'unsafe file'), 'path')).toBe(false);
  });

  it('keeps its path read-only and in JSON, where a tool reading the error finds it', () => {
    const error = new ContractError('refused', 'x: unsafe', { path: '/x' });
    expect(JSON.parse(JSON.stringify(error))).toEqual({ name: 'ContractError', code: 'refused', path: '/x' });
    expect(() => {
      (error as { path?: string }).path = '/elsewhere';
    }).toThrow(TypeError);
    expect(error.path).toBe('/x');
  });

  it('carries the remedy it is given, read-only and in JSON, and has none when none is given', () => {
    const error = new ContractError('refused', '/s: folder has group or other permission bits', {
      path: '/s',
      remedy: 'take the group and other bits away: `chmod 700 /s`',
    });
    expect(error.remedy).toBe('take the group and other bits away: `chmod 700 /s`');
    expect(JSON.parse(JSON.stringify(error))).toEqual({
      name: 'ContractError',
      code: 'refused',
      path: '/s',
      remedy: 'take the group and other bits away: `chmod 700 /s`',
    });
    expect(() => {
      (error as { remedy?: string }).remedy = 'something else';
    }).toThrow(TypeError);
    expect(error.remedy).toBe('take the group and other bits away: `chmod 700 /s`');
    const without = new ContractError('refused', 'unsafe file', { path: '/x' });
    expect(without.remedy).toBeUndefined();
    expect(Object.hasOwn(without, 'remedy')).toBe(false);
  });

  it('lists exactly the codes the README documents', () => {
    expect([...CONTRACT_ERROR_CODES]).toEqual([
      'refused',
      'conflict',
      'capacity',
      'quarantine',
      'unavailable',
      'consumed-grant',
      'busy',
    ]);
  });

  it('keeps the brand out of JSON and out of the enumerable keys', () => {
    const error = new ContractError('busy', 'registry lock held');
    expect(JSON.parse(JSON.stringify(error))).toEqual({ name: 'ContractError', code: 'busy' });
    expect(Object.getOwnPropertySymbols(error)).toHaveLength(1);
    expect(Object.keys(error).sort()).toEqual(['code', 'name']);
  });
});

describe('ContractError.is', () => {
  it('recognises an instance of every code', () => {
    for (const code of CONTRACT_ERROR_CODES) {
      expect(ContractError.is(new ContractError(code, 'message'))).toBe(true);
    }
  });

  it('refuses everything that is not a ContractError', () => {
    const lookalike = Object.assign(new Error('refused'), { name: 'ContractError', code: 'refused' });
    for (const value of [
      new Error('refused'),
      new TypeError('x'),
      lookalike,
      { code: 'refused', name: 'ContractError', message: 'x' },
      { [Symbol.for('leasehold.contract-error')]: 'true', code: 'refused' },
      { [Symbol('leasehold.contract-error')]: true, code: 'refused' },
      null,
      undefined,
      'refused',
      42,
      () => undefined,
    ]) {
      expect(ContractError.is(value)).toBe(false);
    }
  });

  it('filters by code', () => {
    const conflict = new ContractError('conflict', 'message');
    expect(ContractError.is(conflict, 'conflict')).toBe(true);
    expect(ContractError.is(conflict, 'refused')).toBe(false);
    expect(ContractError.is(conflict, 'refused', 'conflict')).toBe(true);
    expect(ContractError.is(conflict, 'busy', 'quarantine', 'unavailable')).toBe(false);
    expect(ContractError.is(new Error('conflict'), 'conflict')).toBe(false);
  });

  it('recognises any object carrying the shared Symbol.for brand', () => {
    const fromAnotherCopy = { [Symbol.for('leasehold.contract-error')]: true, code: 'quarantine' as ContractErrorCode };
    expect(ContractError.is(fromAnotherCopy)).toBe(true);
    expect(ContractError.is(fromAnotherCopy, 'quarantine')).toBe(true);
    expect(ContractError.is(fromAnotherCopy, 'refused')).toBe(false);
  });

  it('works across two module instances, where instanceof does not', async () => {
    const BuiltContractError = await builtCopy();
    const built = new BuiltContractError('consumed-grant', 'grant used twice');
    const source = new ContractError('busy', 'lock held');
    expect(BuiltContractError).not.toBe(ContractError);
    expect(built instanceof ContractError).toBe(false);
    expect(source instanceof BuiltContractError).toBe(false);
    expect(ContractError.is(built)).toBe(true);
    expect(ContractError.is(built, 'consumed-grant')).toBe(true);
    expect(ContractError.is(built, 'busy')).toBe(false);
    expect(BuiltContractError.is(source)).toBe(true);
    expect(BuiltContractError.is(source, 'busy')).toBe(true);
    expect(BuiltContractError.is(source, 'refused')).toBe(false);
  });

  it('keeps the path of an error from another copy, so a consumer narrowing with is() can act on it', async () => {
    const BuiltContractError = await builtCopy();
    const caught: unknown = new BuiltContractError(
      'refused',
      '/s/v1/workspaces/ab/service/format.json: a byte-order mark',
      {
        path: '/s/v1/workspaces/ab/service/format.json',
      },
    );
    if (!ContractError.is(caught, 'refused')) throw new Error('not recognised');
    expect(caught.path).toBe('/s/v1/workspaces/ab/service/format.json');
    const pathless: unknown = new BuiltContractError('refused', 'digest: not a SHA-256 hex digest');
    if (!ContractError.is(pathless)) throw new Error('not recognised');
    expect(pathless.path).toBeUndefined();
  });
});
