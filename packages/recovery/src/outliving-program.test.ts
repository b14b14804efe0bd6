import { describe, expect, it } from 'vitest';
import { outlivingProgram, type SnapshotHolders } from './index.js';

const OWNER = { pid: 100, host: 'build-3', processStart: 'linux:00000000-0000-0000-0000-000000000000:1:10' };
const PROGRAM = { pid: 200, host: 'build-3', processStart: 'linux:00000000-0000-0000-0000-000000000000:1:20' };

type Entry = SnapshotHolders['holders'][number];

/** A snapshot whose companion names PROGRAM with `program` status, beside `owners`. */
function snapshot(program: Entry['status'] | undefined, owners: readonly Omit<Entry, 'holder'>[]): SnapshotHolders {
  return {
    fences: [{ kind: 'registration', holder: OWNER }, ...(program === undefined ? [] : [{ kind: 'companion', holder: PROGRAM }])],
    holders: [...owners.map((owner) => ({ holder: OWNER, ...owner })), ...(program === undefined ? [] : [{ holder: PROGRAM, status: program }])],
  };
}

describe('outlivingProgram: the companion that outlived its owner', () => {
  it.each([
    { case: 'a live program, its owner absent', program: 'live', owners: [{ status: 'absent' }], named: true },
    { case: 'a live program, its owner leased on etcd but its process absent here', program: 'live', owners: [{ status: 'absent' }, { status: 'leased', process: 'absent' }], named: true },
    { case: 'a live program, its owner live (running, or silent)', program: 'live', owners: [{ status: 'live' }], named: false },
    { case: 'a live program, its owner ambiguous', program: 'live', owners: [{ status: 'ambiguous' }], named: false },
    { case: 'a live program, its owner leased on another host', program: 'live', owners: [{ status: 'absent' }, { status: 'leased' }], named: false },
    { case: 'a gone program', program: 'absent', owners: [{ status: 'absent' }], named: false },
    { case: 'an ambiguous program', program: 'ambiguous', owners: [{ status: 'absent' }], named: false },
    { case: 'no companion', program: undefined, owners: [{ status: 'absent' }], named: false },
  ] as const)('$case: named $named', ({ program, owners, named }) => {
    expect(outlivingProgram(snapshot(program, owners))).toEqual(named ? PROGRAM : undefined);
  });
});
