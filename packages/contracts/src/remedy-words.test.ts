import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { fileSystemInWords, magicInHex, placeOptions, recoverRemedy, shellQuote } from './remedy-words.js';

/** What a POSIX shell makes of `line`: its words, one a line. */
function wordsOf(line: string): string[] {
  return execFileSync('/bin/sh', ['-c', `printf '%s\\n' ${line}`], { encoding: 'utf8' })
    .split('\n')
    .slice(0, -1);
}

describe('shellQuote', () => {
  it('leaves a plain word as it is, and quotes any other so a shell reads it back exactly', () => {
    expect(shellQuote('/home/ada/.local/state/leasehold')).toBe('/home/ada/.local/state/leasehold');
    for (const word of ['/tmp/my work', "/tmp/it's", '/tmp/$HOME `x` "y"', '/tmp/*', '']) {
      expect(wordsOf(shellQuote(word))).toEqual([word]);
    }
  });
});

describe('placeOptions', () => {
  it('names a workspace and a state home as the leasehold command takes them, each one word', () => {
    expect(placeOptions('/work/a b', '/state')).toBe("--workspace '/work/a b' --state-home /state");
    expect(wordsOf(placeOptions("/work/it's", '/st ate'))).toEqual([
      '--workspace',
      "/work/it's",
      '--state-home',
      '/st ate',
    ]);
  });
});

describe('recoverRemedy', () => {
  it('names the status and the recovery of that workspace, pasteable, and where it must run when the process cannot be told', () => {
    const gone = recoverRemedy('/work/a b', '/state', 'absent');
    expect(gone).toBe(
      "check it with `leasehold status --workspace '/work/a b' --state-home /state`, then review and release what it left with `leasehold recover --workspace '/work/a b' --state-home /state` (a start with recoverDead, --recover-dead, does that itself)",
    );
    const untold = recoverRemedy('/work/a', '/state', 'ambiguous');
    expect([...untold.matchAll(/`([^`]+)`/g)].map((match) => match[1])).toEqual([
      'leasehold status --workspace /work/a --state-home /state',
      'leasehold recover --workspace /work/a --state-home /state',
    ]);
    expect(untold).toContain('from its own host or PID namespace');
    expect(recoverRemedy('/work/a', '/state', 'live')).toBe(
      'check it with `leasehold status --workspace /work/a --state-home /state`; once that process has ended, review and release what it left with `leasehold recover --workspace /work/a --state-home /state`',
    );
  });
});

describe('magicInHex and fileSystemInWords', () => {
  it('write a statfs magic number as the kernel headers do, unsigned, and a file system with it', () => {
    expect(magicInHex(0xef53)).toBe('0xef53');
    expect(magicInHex(0x858458f6)).toBe('0x858458f6');
    expect(fileSystemInWords({ name: 'nfs', magic: 0x6969 })).toBe('nfs (statfs magic 0x6969)');
    expect(fileSystemInWords({ name: 'unknown', magic: 0x858458f6 })).toBe('unknown (statfs magic 0x858458f6)');
  });
});
