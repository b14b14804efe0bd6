import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, chownSync, linkSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { encode } from '@leasehold/contracts';
import { Registry, allowanceOf } from '@leasehold/registry';
import {
  currentProcess,
  fileSystemOf,
  ownerStatus,
  type PrivateFilesHooks,
  type ProcessIdentity,
} from '@leasehold/private-files';
import { acquireWorkspace } from '@leasehold/coordination';
import {
  cleanUp,
  codeOf,
  codeOfAsync,
  loopbackEndpoint,
  handPlaces,
  killAndReap,
  makePlace,
  makeTemporaryFolder,
  makeWorkspace,
  messageOf,
  mountOn,
  mountsAllowed,
  namesIn,
  processStartWith,
  rewriteJson,
  sha256Hex,
  spawnSharedFixture,
  type TestPlace,
} from '@leasehold/test-utils';
import {
  FIXTURE_MODULES,
  OWNER_CONFIG,
  coordinationOf,
  deadOwner,
  grantOf,
  recoverWith,
  viewOf,
  writeByHand,
} from '../test/helpers.js';
import { FINDING_KINDS, diagnose, type Finding, type FindingRemedy } from './index.js';

afterEach(cleanUp);

/** Hooks that fail the test at any mutating step: diagnosis changes nothing. */
const NO_MUTATION: PrivateFilesHooks = {
  beforeMutation(step) {
    throw new Error(`diagnose mutated: ${step.operation} ${step.action} ${step.path}`);
  },
};

/** `diagnose` of the test's state home, with the hooks that forbid every mutation. */
function findingsOf(place: TestPlace): Finding[] {
  const findings = diagnose(place.stateHome, { hooks: NO_MUTATION });
  for (const finding of findings) {
    expect(FINDING_KINDS).toContain(finding.kind);
    expect(finding.path).toMatch(/^\//);
    expect(finding.problem).not.toBe('');
    expect(Object.values(finding.remedy)).not.toContain('');
  }
  return findings;
}

/** The remedy that recovers `root` in the test's state home. */
function recoverRemedy(place: TestPlace, root: string): FindingRemedy {
  return { kind: 'recover', workspace: root, stateHome: place.stateHome };
}

/** The remedy that removes the file (or, `recursive`, the folder) at `path`. */
function removeRemedy(path: string, recursive = false): FindingRemedy {
  return { kind: 'remove', path, recursive };
}

/** A holder proved gone: this pid as it was on another boot. */
function goneHolder(): ProcessIdentity {
  const holder = {
    ...currentProcess(),
    processStart: processStartWith(currentProcess().processStart, 'bootId', randomUUID()),
  };
  expect(ownerStatus(holder.pid, holder.host, holder.processStart)).toBe('absent');
  return holder;
}

/** A holder that cannot be told from here: this pid in another PID namespace (a container sharing the state home). */
function otherNamespaceHolder(): ProcessIdentity {
  const holder = {
    ...currentProcess(),
    processStart: processStartWith(currentProcess().processStart, 'pidNamespace', '1'),
  };
  expect(ownerStatus(holder.pid, holder.host, holder.processStart)).toBe('ambiguous');
  return holder;
}

/** A served-and-released workspace: a registry, a service folder and a stopped registration. */
async function stoppedWorkspace(place: TestPlace, name: string, port: number): Promise<string> {
  const root = makeWorkspace(place, name);
  await (await acquireWorkspace(coordinationOf(place, root), OWNER_CONFIG, loopbackEndpoint(port))).release();
  return root;
}

/** Writes a registry lock (or take-over marker) at `path` by hand, naming `holder`; answers its token. */
function writeLock(path: string, holder: ProcessIdentity, root: string): string {
  const token = randomUUID();
  writeByHand(path, encode({ schema: 'leasehold.registry-lock/1', token, ...holder, root }));
  return token;
}

/** A staging name (format of private-files' staging-name.ts) for a writer on this host. */
function stagingNameOf(writer: ProcessIdentity): string {
  const start = writer.processStart === undefined ? '-' : Buffer.from(writer.processStart).toString('base64url');
  return `${writer.pid}.${sha256Hex(writer.host).slice(0, 16)}.${start}.${randomBytes(8).toString('hex')}.tmp`;
}

const BOM = new Uint8Array([0xef, 0xbb, 0xbf]);

/** Puts a byte-order mark in front of a file's bytes (same inode): a parser-differential risk, refused. */
function prependBom(path: string): void {
  writeFileSync(path, Buffer.concat([BOM, readFileSync(path)]));
}

describe('diagnose: nothing to report', () => {
  it('finds nothing in a missing state home, a healthy one, or one with a live owner and a live plain tool', async () => {
    const place = makePlace('recovery');
    expect(findingsOf(place)).toEqual([]);
    await stoppedWorkspace(place, 'stopped', 45_101);
    expect(findingsOf(place)).toEqual([]);

    const served = makeWorkspace(place, 'served');
    const lease = await acquireWorkspace(coordinationOf(place, served), OWNER_CONFIG, loopbackEndpoint(45_102));
    const tool = spawnSharedFixture(
      'checkout-holder',
      { workspace: makeWorkspace(place, 'tool'), stateHome: place.stateHome },
      FIXTURE_MODULES,
    );
    await messageOf(tool, 'held');
    expect(findingsOf(place)).toEqual([]);
    await lease.release();
    expect(findingsOf(place)).toEqual([]);
  });
});

describe('diagnose: a state home a person made with mkdir (0755)', () => {
  it('empty, it is no finding (its first writer makes it 0700); holding a file, it is an open mode with its chmod', () => {
    const place = makePlace('recovery');
    mkdirSync(place.stateHome);
    chmodSync(place.stateHome, 0o755);
    expect(findingsOf(place)).toEqual([]);
    writeByHand(join(place.stateHome, 'notes.txt'), 'x');
    chmodSync(place.stateHome, 0o755);
    expect(findingsOf(place)).toEqual([
      {
        kind: 'open-mode',
        path: place.stateHome,
        problem: expect.stringContaining('mode 755'),
        remedy: { kind: 'chmod', path: place.stateHome, mode: 0o700 },
      },
    ]);
  });
});

describe.skipIf(!mountsAllowed())('diagnose: a state home on a file system whose guarantees are not proven', () => {
  it('is the one finding, made or not, with the name that allows it; none once the state home allows it', async () => {
    const ramfs = mountOn(makeTemporaryFolder('recovery-ramfs-'), 'mount', '-t', 'ramfs', '-o', 'mode=0700', 'ramfs');
    const stateHome = join(ramfs, 'state');
    const finding: Finding = {
      kind: 'unproven-file-system',
      path: stateHome,
      problem: `the state home is on unknown (statfs magic 0x858458f6), a file system on which Leasehold's guarantees are not proven: every command that uses it is refused`,
      remedy: { kind: 'file-system', stateHome, allowAs: '0x858458f6' },
    };
    expect(diagnose(stateHome, { hooks: NO_MUTATION })).toEqual([finding]);
    // Made by hand, and holding a stray: still the one finding, since every other read is refused.
    mkdirSync(stateHome, { mode: 0o700 });
    writeByHand(join(stateHome, 'notes.txt'), 'x');
    expect(diagnose(stateHome, { hooks: NO_MUTATION })).toEqual([finding]);
    rmSync(join(stateHome, 'notes.txt'));
    await new Registry(stateHome, { allowFileSystem: allowanceOf(fileSystemOf(stateHome)) }).initialize();
    expect(diagnose(stateHome, { hooks: NO_MUTATION })).toEqual([]);
  });
});

describe('diagnose: unsafe files come first and alone', () => {
  it('reports open modes, another owner, a symbolic link and a FIFO, in walk order, and nothing else', async () => {
    const place = makePlace('recovery');
    const root = await stoppedWorkspace(place, 'ws', 45_103);
    const places = handPlaces(place.stateHome, root);
    chmodSync(places.service, 0o755);
    chmodSync(places.registration, 0o644);
    chownSync(places.config, 65_534, 65_534);
    const link = join(places.namespace, 'workspaces', 'link');
    symlinkSync(places.privateRoot, link);
    const fifo = join(places.privateRoot, 'fifo');
    execFileSync('mkfifo', ['-m', '600', fifo]);
    writeByHand(join(places.namespace, 'stray.txt'), 'x'); // a stray, reported only once the modes are fixed

    expect(findingsOf(place)).toEqual([
      { kind: 'special-file', path: fifo, problem: expect.stringContaining('FIFO'), remedy: removeRemedy(fifo) },
      {
        kind: 'open-mode',
        path: places.service,
        problem: expect.stringContaining('mode 755'),
        remedy: { kind: 'chmod', path: places.service, mode: 0o700 },
      },
      {
        kind: 'foreign-owner',
        path: places.config,
        problem: 'owned by uid 65534, not by you',
        remedy: { kind: 'chown', path: places.config, uid: process.geteuid?.(), asRoot: false },
      },
      {
        kind: 'open-mode',
        path: places.registration,
        problem: expect.stringContaining('mode 644'),
        remedy: { kind: 'chmod', path: places.registration, mode: 0o600 },
      },
      {
        kind: 'symbolic-link',
        path: link,
        problem: expect.stringContaining('symbolic link'),
        remedy: removeRemedy(link),
      },
    ]);

    for (const path of [fifo, link]) rmSync(path);
    chmodSync(places.service, 0o700);
    chmodSync(places.registration, 0o600);
    chownSync(places.config, process.geteuid?.() ?? 0, process.getegid?.() ?? 0);
    expect(findingsOf(place).map(({ kind, path }) => ({ kind, path }))).toEqual([
      { kind: 'stray-entry', path: join(places.namespace, 'stray.txt') },
    ]);
  });
});

describe('diagnose: stray names', () => {
  it('reports a stray in every Leasehold folder, with the workspace of those in a private root, and no second finding for the folder', async () => {
    const place = makePlace('recovery');
    const root = await stoppedWorkspace(place, 'ws', 45_104);
    const places = handPlaces(place.stateHome, root);
    const journal = places.journal;
    mkdirSync(journal, { mode: 0o700 });
    const strays = [
      join(places.namespace, 'backup.json'),
      join(places.namespace, 'registry', 'roots.json.bak'),
      join(journal, 'notes.txt'),
      join(places.namespace, 'workspaces', 'not-a-hash'),
      join(places.privateRoot, 'checkout.lock.old'),
      join(places.service, 'notes.txt'),
    ];
    for (const path of strays) writeByHand(path, 'x');
    // A valid journal record name and the service's own reserved names are no strays.
    writeByHand(join(journal, `20250101T000000000Z-${randomUUID()}.json`), '{}');
    mkdirSync(join(places.service, 'history'), { mode: 0o700 });

    const stray = (path: string, workspace?: string) => ({
      kind: 'stray-entry',
      path,
      ...(workspace === undefined ? {} : { workspace }),
      problem: expect.stringContaining('stray'),
      remedy: removeRemedy(path, true),
    });
    expect(findingsOf(place)).toEqual([
      stray(strays[0]!),
      stray(strays[1]!),
      stray(strays[2]!),
      stray(strays[3]!),
      stray(strays[4]!, root),
      stray(strays[5]!, root),
    ]);
    for (const path of strays) rmSync(path);
    expect(findingsOf(place)).toEqual([]);
  });
});

describe('diagnose: staging leftovers', () => {
  it('reports leftovers of gone and untellable writers, not a live writer’s, and no unreadable finding for a file a leftover links', async () => {
    const place = makePlace('recovery');
    const root = await stoppedWorkspace(place, 'ws', 45_105);
    const places = handPlaces(place.stateHome, root);
    mkdirSync(places.staging, { recursive: true, mode: 0o700 });
    const live = join(places.staging, stagingNameOf(currentProcess()));
    const gone = join(places.staging, stagingNameOf(goneHolder()));
    const untellable = join(places.staging, stagingNameOf(otherNamespaceHolder()));
    const unknown = join(places.staging, 'junk');
    for (const path of [live, untellable, unknown]) writeByHand(path, '{}');
    // A writer that died between publishing the registration (a link) and unlinking its temp.
    linkSync(places.registration, gone);

    const byPath = (a: { path: string }, b: { path: string }) => a.path.localeCompare(b.path);
    expect(findingsOf(place).sort(byPath)).toEqual(
      [
        {
          kind: 'staging-leftover',
          path: gone,
          problem: 'a staging leftover of a writer that is gone',
          remedy: removeRemedy(gone, true),
        },
        {
          kind: 'staging-leftover',
          path: untellable,
          problem: expect.stringContaining('cannot tell'),
          remedy: removeRemedy(untellable, true),
        },
        {
          kind: 'staging-leftover',
          path: unknown,
          problem: expect.stringContaining('cannot tell'),
          remedy: removeRemedy(unknown, true),
        },
      ].sort(byPath),
    );
    for (const path of [gone, untellable, unknown]) rmSync(path);
    expect(findingsOf(place)).toEqual([]);
  });
});

describe('diagnose: registry locks and take-over markers', () => {
  const registryOf = (place: TestPlace) => new Registry(place.stateHome, { lockWaitMs: 100 });

  it('reports a registry lock whose holder is in another PID namespace; rm clears it', async () => {
    const place = makePlace('recovery');
    const root = await stoppedWorkspace(place, 'ws', 45_106);
    const { registryLock } = handPlaces(place.stateHome, root);
    const holder = otherNamespaceHolder();
    writeLock(registryLock, holder, root);
    expect(await codeOfAsync(registryOf(place).transaction(root, () => undefined))).toBe('quarantine');

    expect(findingsOf(place)).toEqual([
      {
        kind: 'ambiguous-registry-lock',
        path: registryLock,
        problem: expect.stringContaining(`pid ${holder.pid} on ${holder.host}`),
        remedy: { ...removeRemedy(registryLock), processGone: { pid: holder.pid, host: holder.host, runFrom: 'here' } },
      },
    ]);
    rmSync(registryLock);
    expect(findingsOf(place)).toEqual([]);
    await registryOf(place).transaction(root, () => undefined);
  });

  it('reports the take-over marker of an untellable holder on the dead lock’s chain, and no other marker', async () => {
    const place = makePlace('recovery');
    const root = await stoppedWorkspace(place, 'ws', 45_107);
    const { registryLock } = handPlaces(place.stateHome, root);
    const registry = join(place.stateHome, 'v1', 'registry');
    const marker = (token: string) => join(registry, `takeover-${token}.lock`);

    // A dead writer's lock alone: the next writer takes it over.
    const deadToken = writeLock(registryLock, goneHolder(), root);
    expect(findingsOf(place)).toEqual([]);
    // A marker of an untellable holder for some other lock: not on the chain, the next holder removes it.
    writeLock(marker(randomUUID()), otherNamespaceHolder(), root);
    expect(findingsOf(place)).toEqual([]);
    // A dead writer's marker for the dead lock, then an untellable one's marker taking that marker over.
    const deadMarkerToken = writeLock(marker(deadToken), goneHolder(), root);
    expect(findingsOf(place)).toEqual([]);
    const holder = otherNamespaceHolder();
    const blocking = marker(deadMarkerToken);
    writeLock(blocking, holder, root);
    expect(await codeOfAsync(registryOf(place).transaction(root, () => undefined))).toBe('quarantine');
    expect(findingsOf(place)).toEqual([
      {
        kind: 'ambiguous-takeover-marker',
        path: blocking,
        problem: expect.stringContaining(`pid ${holder.pid} on ${holder.host}`),
        remedy: { ...removeRemedy(blocking), processGone: { pid: holder.pid, host: holder.host, runFrom: 'here' } },
      },
    ]);
    rmSync(blocking);
    expect(findingsOf(place)).toEqual([]);
    // The next writer takes the dead lock over and removes every marker.
    await registryOf(place).transaction(root, () => undefined);
    expect(namesIn(registry)).toEqual(['format.json', 'roots.json']);
  });

  it('does not report an untellable holder’s marker while no lock exists: the next writer removes it', async () => {
    const place = makePlace('recovery');
    const root = await stoppedWorkspace(place, 'ws', 45_108);
    const registry = join(place.stateHome, 'v1', 'registry');
    writeLock(join(registry, `takeover-${randomUUID()}.lock`), otherNamespaceHolder(), root);
    expect(findingsOf(place)).toEqual([]);
    await registryOf(place).transaction(root, () => undefined);
    expect(namesIn(registry)).toEqual(['format.json', 'roots.json']);
  });
});

describe('diagnose: owners', () => {
  it('reports a dead owner’s fences with the recover command; after that recovery it is clean', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'ws');
    await deadOwner(place, root);
    const places = handPlaces(place.stateHome, root);
    expect(findingsOf(place)).toEqual([
      {
        kind: 'dead-owner',
        path: places.roots,
        workspace: root,
        problem: expect.stringContaining(`the owner of ${root} is gone`),
        remedy: recoverRemedy(place, root),
      },
    ]);
    expect(await recoverWith(place, root, viewOf(place, root).digest)).toMatchObject({ recovered: true });
    expect(findingsOf(place)).toEqual([]);
  });

  it('reports a workspace fenced by a dead owner of another PID namespace, naming it and where to recover it', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'ws');
    const { pid } = await deadOwner(place, root);
    const places = handPlaces(place.stateHome, root);
    // The same owner, as a container sharing this state home would have written it.
    const otherNamespace = (value: Record<string, unknown>) => {
      value.processStart = processStartWith(value.processStart as string, 'pidNamespace', '1');
    };
    rewriteJson(places.roots, (value) => {
      for (const entry of value.entries as Record<string, unknown>[]) if (entry.root === root) otherNamespace(entry);
    });
    rewriteJson(places.registration, otherNamespace);
    rewriteJson(places.checkoutLock, otherNamespace);
    rewriteJson(places.mark, otherNamespace);
    const snapshot = viewOf(place, root);
    expect(snapshot.holders.map(({ verdict }) => verdict)).toEqual(['ambiguous']);
    expect(codeOf(() => grantOf(place, root, snapshot.digest))).toBe('quarantine');

    const { host } = currentProcess();
    expect(findingsOf(place)).toEqual([
      {
        kind: 'ambiguous-owner',
        path: places.roots,
        workspace: root,
        problem: expect.stringContaining(`fenced by pid ${pid} on ${host}, which this host cannot tell live or gone`),
        remedy: { ...recoverRemedy(place, root), processGone: { pid, host, runFrom: 'its-pid-namespace' } },
      },
    ]);
  });

  it('reports a registered root whose folder was deleted; the recover command clears it', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'doomed');
    const { pid } = await deadOwner(place, root);
    rmSync(root, { recursive: true });
    expect(findingsOf(place)).toEqual([
      {
        kind: 'deleted-root',
        path: handPlaces(place.stateHome, root).roots,
        workspace: root,
        problem: `${root} is registered but its folder no longer exists (owner pid ${pid} on ${currentProcess().host} is not live)`,
        remedy: recoverRemedy(place, root),
      },
    ]);
    expect(await recoverWith(place, root, viewOf(place, root).digest)).toMatchObject({ recovered: true });
    expect(findingsOf(place)).toEqual([]);
  });

  it('reports a plain tool’s checkout lock whose holder is gone, named by its workspace when one is known', async () => {
    const place = makePlace('recovery');
    const never = makeWorkspace(place, 'never-served');
    const stopped = await stoppedWorkspace(place, 'stopped', 45_109);
    const tools = [never, stopped].map((workspace) =>
      spawnSharedFixture('checkout-holder', { workspace, stateHome: place.stateHome }, FIXTURE_MODULES),
    );
    for (const tool of tools) await messageOf(tool, 'held');
    expect(findingsOf(place)).toEqual([]);
    for (const tool of tools) expect((await killAndReap(tool)).signal).toBe('SIGKILL');

    const lockOf = (root: string) => handPlaces(place.stateHome, root).checkoutLock;
    const expected = [
      { path: lockOf(never), pid: tools[0]!.pid },
      { path: lockOf(stopped), pid: tools[1]!.pid, workspace: stopped },
    ].sort((a, b) => a.path.localeCompare(b.path));
    expect(findingsOf(place)).toEqual(
      expected.map(({ path, pid, workspace }) => ({
        kind: 'dead-checkout-lock',
        path,
        ...(workspace === undefined ? {} : { workspace }),
        problem: expect.stringContaining(`pid ${pid} on ${currentProcess().host}`),
        // Where its workspace is known, the tool's folder mark is there too: a recovery removes both.
        remedy: workspace === undefined ? removeRemedy(path) : recoverRemedy(place, workspace),
      })),
    );
    for (const { path, workspace } of expected) {
      if (workspace === undefined) rmSync(path);
      else await recoverWith(place, workspace, viewOf(place, workspace).digest);
    }
    expect(findingsOf(place)).toEqual([]);
  });
});

describe('diagnose: unreadable files', () => {
  it('names the full path and the workspace of each unreadable file, and still checks the rest of that workspace and the others', async () => {
    const place = makePlace('recovery');
    const broken = makeWorkspace(place, 'broken');
    const healthy = makeWorkspace(place, 'healthy');
    const stopped = await stoppedWorkspace(place, 'stopped', 45_110);
    await deadOwner(place, broken);
    const b = handPlaces(place.stateHome, broken);
    const h = handPlaces(place.stateHome, healthy);
    const s = handPlaces(place.stateHome, stopped);
    // healthy's owner died too, on its own endpoint.
    const child = spawnSharedFixture(
      'crasher',
      {
        workspace: healthy,
        stateHome: place.stateHome,
        operation: 'acquire',
        config: OWNER_CONFIG,
        endpoint: loopbackEndpoint(45_111),
        killAt: 'hold',
      },
      FIXTURE_MODULES,
    );
    await messageOf(child, 'held');
    expect((await killAndReap(child)).signal).toBe('SIGKILL');
    prependBom(b.format);
    prependBom(b.ownerLock);
    prependBom(s.format); // a stopped workspace is known by its registration

    const unreadable = (path: string, workspace: string) => ({
      kind: 'unreadable',
      path,
      workspace,
      problem: expect.stringContaining('byte-order mark'),
      remedy: { kind: 'repair', path, stateHome: place.stateHome },
    });
    const deadOwnerOf = (root: string, path: string, problem: string) => ({
      kind: 'dead-owner',
      path,
      workspace: root,
      problem: expect.stringContaining(problem),
      remedy: recoverRemedy(place, root),
    });
    const perWorkspace = new Map([
      [
        b.privateRoot,
        [
          unreadable(b.format, broken),
          unreadable(b.ownerLock, broken),
          deadOwnerOf(broken, b.roots, 'fix the findings above first'),
        ],
      ],
      [h.privateRoot, [deadOwnerOf(healthy, h.roots, `the owner of ${healthy} is gone but`)]],
      [s.privateRoot, [unreadable(s.format, stopped)]],
    ]);
    const inFolderOrder = [...perWorkspace.keys()].sort().flatMap((key) => perWorkspace.get(key)!);
    expect(findingsOf(place)).toEqual(inFolderOrder);

    // Once the files are repaired, the broken workspace is an ordinary dead owner, and recovers.
    for (const path of [b.format, b.ownerLock, s.format]) writeFileSync(path, readFileSync(path).subarray(BOM.length));
    expect(findingsOf(place).map(({ kind, workspace }) => ({ kind, workspace }))).toEqual(
      [
        [b.privateRoot, broken],
        [h.privateRoot, healthy],
      ]
        .sort(([x], [y]) => x!.localeCompare(y!))
        .map(([, workspace]) => ({ kind: 'dead-owner', workspace })),
    );
    for (const root of [broken, healthy])
      expect(await recoverWith(place, root, viewOf(place, root).digest)).toMatchObject({ recovered: true });
    expect(findingsOf(place)).toEqual([]);
  });

  it('names the registry file that does not decode, and still reports a dead owner from its registration', async () => {
    const place = makePlace('recovery');
    const root = makeWorkspace(place, 'ws');
    await deadOwner(place, root);
    const places = handPlaces(place.stateHome, root);
    prependBom(places.roots);
    expect(findingsOf(place)).toEqual([
      {
        kind: 'unreadable',
        path: places.roots,
        problem: expect.stringContaining('byte-order mark'),
        remedy: { kind: 'repair', path: places.roots, stateHome: place.stateHome },
      },
      {
        kind: 'dead-owner',
        path: places.registration,
        workspace: root,
        problem: expect.stringContaining('fix the findings above first'),
        remedy: recoverRemedy(place, root),
      },
    ]);
  });
});
