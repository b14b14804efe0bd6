import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { placeOptions, shellQuote } from './command-lines.js';

/** What a POSIX shell makes of `line`: its words, one a line. */
function wordsOf(line: string): string[] {
  return execFileSync('/bin/sh', ['-c', `printf '%s\\n' ${line}`], { encoding: 'utf8' }).split('\n').slice(0, -1);
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
    expect(wordsOf(placeOptions("/work/it's", '/st ate'))).toEqual(['--workspace', "/work/it's", '--state-home', '/st ate']);
  });
});
