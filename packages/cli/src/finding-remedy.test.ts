import type { FindingRemedy } from '@leasehold/recovery';
import { describe, expect, it } from 'vitest';
import { findingRemedyLine } from './finding-remedy.js';

// The words `doctor` printed when `diagnose` wrote them itself: a remedy's kind changed its type,
// not one character of its line. A path with a space and a quote shows the quoting.
const P = "/state/v1/it's here";
const QUOTED = `'/state/v1/it'\\''s here'`;
const S = '/state';
const W = '/work/ws';

describe('the line of each kind of remedy', () => {
  it.each<[FindingRemedy, string]>([
    [{ kind: 'remove', path: P, recursive: false }, `rm ${QUOTED}`],
    [{ kind: 'remove', path: P, recursive: true }, `rm -r ${QUOTED}`],
    [
      { kind: 'remove', path: P, recursive: false, processGone: { pid: 42, host: 'h2', runFrom: 'here' } },
      `make sure that process is gone, then: rm ${QUOTED}`,
    ],
    [{ kind: 'chmod', path: P, mode: 0o700 }, `chmod 700 ${QUOTED}`],
    [{ kind: 'chmod', path: P, mode: 0o600 }, `chmod 600 ${QUOTED}`],
    [{ kind: 'chown', path: P, uid: 0, asRoot: false }, `chown 0 ${QUOTED}`],
    [{ kind: 'chown', path: P, uid: 1000, asRoot: true }, `as root: chown 1000 ${QUOTED}`],
    [
      { kind: 'own-state-home', uid: 1001 },
      'it is the state home of uid 1001: run as that user, or use a state home of your own',
    ],
    [
      { kind: 'repair', path: P, stateHome: S },
      `repair or restore ${QUOTED} by hand (Leasehold never rewrites a file it cannot read), then: leasehold doctor --state-home ${S}`,
    ],
    [
      { kind: 'wait-for-writer', stateHome: S },
      `wait for that writer, then run again: leasehold doctor --state-home ${S}`,
    ],
    [{ kind: 'recover', workspace: W, stateHome: S }, `leasehold recover --workspace ${W} --state-home ${S}`],
    [
      { kind: 'recover', workspace: W, stateHome: S, processGone: { pid: 42, host: 'h2', runFrom: 'its-host' } },
      `make sure pid 42 on h2 is gone, then, on h2: leasehold recover --workspace ${W} --state-home ${S}`,
    ],
    [
      {
        kind: 'recover',
        workspace: W,
        stateHome: S,
        processGone: { pid: 42, host: 'h1', runFrom: 'its-pid-namespace' },
      },
      `make sure pid 42 on h1 is gone, then, from inside the PID namespace (the container) it ran in: leasehold recover --workspace ${W} --state-home ${S}`,
    ],
    [{ kind: 'stop', workspace: W, stateHome: S }, `leasehold stop --workspace ${W} --state-home ${S}`],
  ])('%j', (remedy, line) => {
    expect(findingRemedyLine(remedy)).toBe(line);
  });
});
