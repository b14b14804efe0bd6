import { describe, expect, it } from 'vitest';
import { outlivingProgram, type ViewHolders } from './index.js';

const OWNER = { pid: 100, host: 'build-3', processStart: 'linux:00000000-0000-0000-0000-000000000000:1:10' };
const PROGRAM = { pid: 200, host: 'build-3', processStart: 'linux:00000000-0000-0000-0000-000000000000:1:20' };

type Entry = ViewHolders['holders'][number];

/** A snapshot whose companion names PROGRAM with `program` verdict, beside `owners`. */
function snapshot(program: Entry['verdict'] | undefined, owners: readonly Omit<Entry, 'holder'>[]): ViewHolders {
  return {
    fences: [
      { kind: 'registration', holder: OWNER },
      ...(program === undefined ? [] : [{ kind: 'companion', holder: PROGRAM }]),
    ],
    holders: [
      ...owners.map((owner) => ({ holder: OWNER, ...owner })),
      ...(program === undefined ? [] : [{ holder: PROGRAM, verdict: program }]),
    ],
  };
}

describe('outlivingProgram: the companion that outlived its owner', () => {
  it.each([
    { case: 'a live program, its owner absent', program: 'live', owners: [{ verdict: 'absent' }], named: true },
    {
      case: 'a live program, its owner leased on etcd but its process absent here',
      program: 'live',
      owners: [{ verdict: 'absent' }, { verdict: 'leased', process: 'absent' }],
      named: true,
    },
    {
      case: 'a live program, its owner live (running, or silent)',
      program: 'live',
      owners: [{ verdict: 'live' }],
      named: false,
    },
    { case: 'a live program, its owner ambiguous', program: 'live', owners: [{ verdict: 'ambiguous' }], named: false },
    {
      case: 'a live program, its owner leased on another host',
      program: 'live',
      owners: [{ verdict: 'absent' }, { verdict: 'leased' }],
      named: false,
    },
    { case: 'a gone program', program: 'absent', owners: [{ verdict: 'absent' }], named: false },
    { case: 'an ambiguous program', program: 'ambiguous', owners: [{ verdict: 'absent' }], named: false },
    { case: 'no companion', program: undefined, owners: [{ verdict: 'absent' }], named: false },
  ] as const)('$case: named $named', ({ program, owners, named }) => {
    expect(outlivingProgram(snapshot(program, owners))).toEqual(named ? PROGRAM : undefined);
  });
});
