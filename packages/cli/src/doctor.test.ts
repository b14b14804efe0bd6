import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { decode, encode, registryLockSchema, sha256 } from '@leasehold/contracts';
import { fileSystemOf } from '@leasehold/state-home';
import { cleanUp, killAndReap, makeTemporaryFolder, mountOn, mountsAllowed, rewriteJson } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  checkoutHolder,
  cli,
  deadPid,
  json,
  killAll,
  registryWriter,
  removeSandboxes,
  sandbox,
  type Result,
  type Sandbox,
  localFileSystem,
  onLocalDisk,
} from '../test/helpers.js';
import { capabilitiesSeen, capabilityLeaks } from '../test/transcript.js';

afterEach(async () => {
  await killAll();
  removeSandboxes();
  await cleanUp();
});

interface Finding {
  readonly file: string;
  readonly problem: string;
  readonly fix: string;
  readonly kind: string;
  readonly workspace: string | null;
}

/** The line `doctor` starts with: the state home's file system, local and proven for a temp folder. */
function fileSystemLine(stateHome: string): string {
  return `file system  ${fileSystemOf(stateHome).name} (local: proven)`;
}

/**
 * `doctor --json`: its exit status and findings, each exactly `{ file, problem, fix, kind, workspace }`,
 * after the state home's file system.
 */
async function doctor(box: Sandbox): Promise<{ code: number | null; findings: Finding[] }> {
  const result = await cli(['doctor', '--state-home', box.stateHome, '--json']);
  const document = json(result) as { fileSystem: unknown; findings: Finding[] };
  expect(Object.keys(document)).toEqual(['fileSystem', 'findings']);
  expect(document.fileSystem).toEqual(localFileSystem(box.stateHome));
  for (const finding of document.findings) {
    expect(Object.keys(finding).sort()).toEqual(['file', 'fix', 'kind', 'problem', 'workspace']);
    expect(finding.file).toMatch(/^\//);
    expect(finding.problem).not.toBe('');
  }
  expect(result.code).toBe(document.findings.length === 0 ? 0 : 3);
  return { code: result.code, findings: document.findings };
}

async function expectClean(box: Sandbox): Promise<void> {
  const { code, findings } = await doctor(box);
  expect(findings).toEqual([]);
  expect(code).toBe(0);
  const human = await cli(['doctor', '--state-home', box.stateHome]);
  expect(human.code).toBe(0);
  expect(human.stdout).toBe(`${fileSystemLine(box.stateHome)}\nno problem found in ${box.stateHome}\n`);
}

function expectOk(result: Result, label: string): void {
  expect(result.code, `${label}\n${result.stdout}${result.stderr}`).toBe(0);
}

/**
 * Runs a suggested fix in `sh -c` (the command after a proviso for the person,
 * who has checked it). A suggested `leasehold recover` shows the
 * digest and the command that acts on it; that command is run next, as the
 * person reading it would.
 */
async function applyFix(box: Sandbox, suggested: string): Promise<void> {
  // "make sure that process is gone, then: rm P": the person checks, then runs the command.
  const fix = suggested.startsWith(PROVISO) ? suggested.slice(PROVISO.length) : suggested;
  const first = await box.shell(fix);
  expectOk(first, fix);
  if (!fix.startsWith('leasehold recover ')) return;
  const next = /^Every holder is gone\. To recover: (leasehold recover .* --digest [0-9a-f]{64} --yes)$/m.exec(
    first.stdout,
  )?.[1];
  expect(next, first.stdout).toBeDefined();
  const second = await box.shell(next!);
  expectOk(second, next!);
  expect(second.stdout).toMatch(/^recovered /);
}

/** Serves `workspace` and stops it, so that the state home holds a registry and a stopped service. */
async function servedAndStopped(box: Sandbox, workspace: string): Promise<string> {
  const { server, ready } = await box.serve(workspace);
  expect(json(await cli(['stop', ...box.place(workspace), '--json']))).toEqual({
    stopped: true,
    root: workspace,
    epoch: ready.epoch,
  });
  expect((await server.exit()).code).toBe(0);
  return ready.epoch;
}

/** Serves `workspace` again and stops it: the proof that nothing blocks it any more. */
async function servesAgain(box: Sandbox, workspace: string): Promise<void> {
  await servedAndStopped(box, workspace);
}

/** The words before the command in the fix of a lock whose holder this host cannot tell. */
const PROVISO = 'make sure that process is gone, then: ';

/** A host name that is not this one: its processes read `ambiguous` here. */
const OTHER_HOST = 'build-7.other-host.invalid';

/** Writes a registry lock (or take-over marker) document at `path` naming `holder`, as a writer would. */
function writeLock(path: string, holder: { token?: string; pid: number; host: string; root: string }): string {
  const lock = decode(registryLockSchema, {
    schema: 'leasehold.registry-lock/1',
    token: holder.token ?? randomUUID(),
    pid: holder.pid,
    host: holder.host,
    root: holder.root,
  });
  writeFileSync(path, encode(lock), { mode: 0o600, flag: 'wx' });
  chmodSync(path, 0o600);
  return lock.token;
}

/** A byte-order mark: `parse` refuses a file that starts with one. */
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/** The private root of `workspace` (docs/layout.md, "A workspace's private root": the first 32 hex of the SHA-256 of its root), computed by hand. */
function privateRootOf(box: Sandbox, workspace: string): string {
  return join(box.namespace, 'workspaces', sha256(new TextEncoder().encode(workspace)).slice(0, 32));
}

/** The names in the registry folder. */
function registryFolder(box: Sandbox): string[] {
  return readdirSync(join(box.namespace, 'registry')).sort();
}

describe('leasehold doctor', () => {
  it('is clean on a missing and on a healthy state home (exit 0)', async () => {
    const box = sandbox();
    await expectClean(box);
    const workspace = box.workspace('ws');
    await servedAndStopped(box, workspace);
    await expectClean(box);
  });

  it('finds a registry lock whose holder is on another host; once that process is gone, rm clears it', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const epoch = await servedAndStopped(box, workspace);
    const lockPath = join(box.namespace, 'registry', 'registry.lock');
    writeLock(lockPath, { pid: 4242, host: OTHER_HOST, root: box.workspace('elsewhere') });

    // Every writer is fenced off: this host cannot tell whether that holder is still writing.
    const blocked = await cli(['serve', ...box.place(workspace), '--json']);
    expect(blocked.code).toBe(1);
    expect(json(blocked).error).toBe('quarantine');
    // Readers never look at the lock.
    expect(json(await cli(['status', ...box.place(workspace), '--json']))).toEqual({
      status: 'stopped',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch,
      config: expect.any(Object),
    });

    const { code, findings } = await doctor(box);
    expect(code).toBe(3);
    expect(findings).toEqual([
      {
        kind: 'ambiguous-registry-lock',
        file: lockPath,
        workspace: null,
        problem: expect.stringContaining(`pid 4242 on ${OTHER_HOST}`),
        fix: `${PROVISO}rm ${lockPath}`,
      },
    ]);
    const human = await cli(['doctor', '--state-home', box.stateHome]);
    expect(human.stdout.split('\n')).toEqual([
      fileSystemLine(box.stateHome),
      '',
      lockPath,
      `  problem:   ${findings[0]!.problem}`,
      `  fix:       ${PROVISO}rm ${lockPath}`,
      '',
      '',
    ]);

    await applyFix(box, findings[0]!.fix);
    await expectClean(box);
    await servesAgain(box, workspace);
    expect(registryFolder(box)).toEqual(['format.json', 'roots.json']);
  });

  it('finds a take-over marker whose holder is on another host; once that process is gone, rm clears it', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    await servedAndStopped(box, workspace);
    // A dead writer's lock, which a writer of another host began to take over.
    const registry = join(box.namespace, 'registry');
    const deadToken = writeLock(join(registry, 'registry.lock'), {
      pid: await deadPid(),
      host: hostname(),
      root: box.workspace('crashed'),
    });
    const markerPath = join(registry, `takeover-${deadToken}.lock`);
    writeLock(markerPath, { pid: 4242, host: OTHER_HOST, root: box.workspace('elsewhere') });

    const blocked = await cli(['serve', ...box.place(workspace), '--json']);
    expect(blocked.code).toBe(1);
    expect(json(blocked).error).toBe('quarantine');

    // The dead writer's lock is no finding: only the marker of the holder nobody here can tell.
    const { code, findings } = await doctor(box);
    expect(code).toBe(3);
    expect(findings).toEqual([
      {
        kind: 'ambiguous-takeover-marker',
        file: markerPath,
        workspace: null,
        problem: expect.stringContaining(`pid 4242 on ${OTHER_HOST}`),
        fix: `${PROVISO}rm ${markerPath}`,
      },
    ]);
    await applyFix(box, findings[0]!.fix);
    await expectClean(box);
    expect(registryFolder(box)).toEqual(['format.json', 'registry.lock', 'roots.json']);

    // The next writer takes the dead lock over, and leaves the folder clean.
    await servesAgain(box, workspace);
    expect(registryFolder(box)).toEqual(['format.json', 'roots.json']);
    await expectClean(box);
  });

  it('finds nothing in a dead writer’s registry lock or take-over marker: the next serve takes them over', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const epoch = await servedAndStopped(box, workspace);
    const lockPath = join(box.namespace, 'registry', 'registry.lock');

    // A writer inside its transaction for another root: its lock is a transaction in progress, no finding.
    const writer = await registryWriter(box.stateHome, box.workspace('other'));
    const held = JSON.parse(readFileSync(lockPath, 'utf8')) as { token: string; pid: number };
    expect(held.pid).toBe(writer.pid);
    await expectClean(box);
    // Readers never look at the lock: status and list answer while it is held.
    expect(json(await cli(['status', ...box.place(workspace), '--json']))).toEqual({
      status: 'stopped',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch,
      config: expect.any(Object),
    });
    expect(json(await cli(['list', '--state-home', box.stateHome, '--json']))).toEqual({ entries: [] });

    // Killed inside the transaction: its lock stays, naming a process that is gone. A second
    // writer that died while taking it over left its marker too.
    expect((await writer.kill9()).signal).toBe('SIGKILL');
    writeLock(join(box.namespace, 'registry', `takeover-${held.token}.lock`), {
      pid: await deadPid(),
      host: hostname(),
      root: workspace,
    });
    expect(registryFolder(box)).toEqual(['format.json', 'registry.lock', 'roots.json', `takeover-${held.token}.lock`]);
    await expectClean(box);

    await servesAgain(box, workspace);
    expect(registryFolder(box)).toEqual(['format.json', 'roots.json']);
    await expectClean(box);
  });

  it('finds a dead writer’s staging leftover, and rm fixes it', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    await servedAndStopped(box, workspace);
    const hostTag = sha256(new TextEncoder().encode(hostname())).slice(0, 16);
    const leftover = join(
      box.namespace,
      '.staging',
      `${await deadPid()}.${hostTag}.-.${randomBytes(8).toString('hex')}.tmp`,
    );
    writeFileSync(leftover, '{"half":"written"', { mode: 0o600, flag: 'wx' });

    const { code, findings } = await doctor(box);
    expect(code).toBe(3);
    expect(findings).toEqual([
      {
        kind: 'staging-leftover',
        file: leftover,
        workspace: null,
        problem: expect.stringContaining('staging leftover'),
        fix: `rm -r ${leftover}`,
      },
    ]);
    await applyFix(box, findings[0]!.fix);
    await expectClean(box);
  });

  it('finds a checkout lock left by a plain tool that was killed; rm, then the recovery its folder mark asks for, fix it', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const holder = await checkoutHolder(workspace, box.stateHome);
    // A live tool's lock is no finding, and it keeps services out.
    await expectClean(box);
    const whileHeld = await cli(['serve', ...box.place(workspace), '--json']);
    expect(whileHeld.code).toBe(1);
    expect(json(whileHeld).error).toBe('conflict');

    expect((await killAndReap(holder)).signal).toBe('SIGKILL');
    const [privateRoot] = readdirSync(join(box.namespace, 'workspaces'));
    const lockPath = join(box.namespace, 'workspaces', privateRoot!, 'checkout.lock');
    const { code, findings } = await doctor(box);
    expect(code).toBe(3);
    expect(findings).toEqual([
      {
        kind: 'dead-checkout-lock',
        file: lockPath,
        workspace: null, // never served: nothing names the workspace of that private root
        problem: expect.stringContaining(`pid ${holder.pid} on ${hostname()}`),
        fix: `rm ${lockPath}`,
      },
    ]);
    // Still blocked, now by a gone process: quarantine, naming it (recover would clear it too).
    const stillBlocked = await cli(['serve', ...box.place(workspace), '--json']);
    expect(stillBlocked.code).toBe(1);
    expect(json(stillBlocked)).toMatchObject({
      error: 'quarantine',
      message: expect.stringContaining(`pid ${holder.pid} on host ${hostname()} (absent)`),
    });

    await applyFix(box, findings[0]!.fix);
    await expectClean(box);
    // The tool's folder mark stays (nothing named its folder to doctor): serve says so, and recover clears it.
    const marked = await cli(['serve', ...box.place(workspace), '--json']);
    expect(json(marked)).toMatchObject({
      error: 'quarantine',
      path: join(workspace, '.leasehold', 'owner.json'),
      remedy: expect.stringContaining(`leasehold recover --workspace ${workspace} --state-home ${box.stateHome}`),
    });
    await applyFix(box, `leasehold recover --workspace ${workspace} --state-home ${box.stateHome}`);
    await servesAgain(box, workspace);
    await expectClean(box);
  });

  it('finds unsafe permissions on a file and on a folder, and chmod fixes them', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const epoch = await servedAndStopped(box, workspace);
    const [service] = box.serviceFolders();
    const registration = join(service!, 'registration.json');
    chmodSync(registration, 0o644);
    chmodSync(service!, 0o755);

    const status = await cli(['status', ...box.place(workspace), '--json']);
    expect(status.code).toBe(3);
    expect(json(status).status).toBe('unavailable');

    const { code, findings } = await doctor(box);
    expect(code).toBe(3);
    expect(findings).toEqual([
      {
        kind: 'open-mode',
        file: service!,
        workspace: null,
        problem: expect.stringContaining('mode 755'),
        fix: `chmod 700 ${service!}`,
      },
      {
        kind: 'open-mode',
        file: registration,
        workspace: null,
        problem: expect.stringContaining('mode 644'),
        fix: `chmod 600 ${registration}`,
      },
    ]);
    const human = await cli(['doctor', '--state-home', box.stateHome]);
    expect(human.code).toBe(3);
    expect(human.stdout.split('\n')).toEqual([
      fileSystemLine(box.stateHome),
      '',
      service!,
      `  problem:   ${findings[0]!.problem}`,
      `  fix:       chmod 700 ${service!}`,
      '',
      registration,
      `  problem:   ${findings[1]!.problem}`,
      `  fix:       chmod 600 ${registration}`,
      '',
      '',
    ]);

    for (const finding of findings) await applyFix(box, finding.fix);
    await expectClean(box);
    const fixed = await cli(['status', ...box.place(workspace), '--json']);
    expect(fixed.code).toBe(3);
    expect(json(fixed)).toMatchObject({ status: 'stopped', root: workspace, epoch, config: expect.any(Object) });
    await servesAgain(box, workspace);
  });

  it('finds a deleted workspace that is still registered; its recover fix releases it', async () => {
    const box = sandbox();
    const workspace = box.workspace('doomed');
    const { server } = await box.serve(workspace);
    await server.kill9();
    rmSync(workspace, { recursive: true, force: true });

    const listed = await cli(['list', '--state-home', box.stateHome, '--json']);
    expect(json(listed)).toMatchObject({
      entries: [{ root: workspace, pid: server.pid, ownerStatus: 'absent', rootExists: false }],
    });
    const humanList = await cli(['list', '--state-home', box.stateHome]);
    expect(humanList.stdout).toContain(`${workspace}  `);
    expect(humanList.stdout).toContain('gone  (owner-gone)  (folder no longer exists)');

    const { code, findings } = await doctor(box);
    expect(code).toBe(3);
    expect(findings).toEqual([
      {
        kind: 'deleted-root',
        file: join(box.namespace, 'registry', 'roots.json'),
        workspace,
        problem: expect.stringContaining(`${workspace} is registered but its folder no longer exists`),
        fix: `leasehold recover --workspace ${workspace} --state-home ${box.stateHome}`,
      },
    ]);
    await applyFix(box, findings[0]!.fix);
    await expectClean(box);
    expect(json(await cli(['list', '--state-home', box.stateHome, '--json']))).toEqual({ entries: [] });
  });

  it('finds stray files in the service folder and in the namespace folder, and rm fixes them', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const epoch = await servedAndStopped(box, workspace);
    const [service] = box.serviceFolders();
    const strayInService = join(service!, 'notes.txt');
    const strayInNamespace = join(box.namespace, 'backup.json');
    writeFileSync(strayInService, 'x', { mode: 0o600 });
    writeFileSync(strayInNamespace, '{}', { mode: 0o600 });

    const { code, findings } = await doctor(box);
    expect(code).toBe(3);
    expect(findings).toHaveLength(2);
    expect(findings).toEqual(
      expect.arrayContaining([
        {
          kind: 'stray-entry',
          file: strayInNamespace,
          workspace: null,
          problem: expect.stringContaining('stray'),
          fix: `rm -r ${strayInNamespace}`,
        },
        {
          kind: 'stray-entry',
          file: strayInService,
          workspace,
          problem: expect.stringContaining('stray'),
          fix: `rm -r ${strayInService}`,
        },
      ]),
    );
    for (const finding of findings) await applyFix(box, finding.fix);
    await expectClean(box);
    const status = await cli(['status', ...box.place(workspace), '--json']);
    expect(json(status)).toMatchObject({ status: 'stopped', root: workspace, epoch, config: expect.any(Object) });
    await servesAgain(box, workspace);
  });

  it('finds a crashed owner (kill -9 of serve); its recover fix releases it and serve works again', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server, ready } = await box.serve(workspace);
    await server.kill9();

    const { code, findings } = await doctor(box);
    expect(code).toBe(3);
    expect(findings).toEqual([
      {
        kind: 'dead-owner',
        file: join(box.namespace, 'registry', 'roots.json'),
        workspace,
        problem: expect.stringContaining(`the owner of ${workspace} is gone`),
        fix: `leasehold recover --workspace ${workspace} --state-home ${box.stateHome}`,
      },
    ]);
    await applyFix(box, findings[0]!.fix);
    await expectClean(box);
    const status = await cli(['status', ...box.place(workspace), '--json']);
    expect(json(status)).toEqual({
      status: 'stopped',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch: ready.epoch,
      config: expect.any(Object),
    });
    await servesAgain(box, workspace);
  });

  it('names the full path and workspace of a service/format.json with a byte-order mark, and still reports that workspace’s other findings', async () => {
    const box = sandbox();
    const broken = box.workspace('broken');
    const other = box.workspace('other');
    for (const workspace of [broken, other]) await (await box.serve(workspace)).server.kill9();
    const service = join(privateRootOf(box, broken), 'service');
    const format = join(service, 'format.json');
    const formatBytes = readFileSync(format);
    writeFileSync(format, Buffer.concat([BOM, formatBytes]));
    const stray = join(service, 'notes.txt');
    writeFileSync(stray, 'x', { mode: 0o600, flag: 'wx' });

    const roots = join(box.namespace, 'registry', 'roots.json');
    const recoverFix = (workspace: string) =>
      `leasehold recover --workspace ${workspace} --state-home ${box.stateHome}`;
    const perWorkspace = new Map([
      [
        privateRootOf(box, broken),
        [
          {
            kind: 'unreadable',
            file: format,
            workspace: broken,
            problem: expect.stringContaining('byte-order mark'),
            fix: expect.stringContaining(`repair or restore ${format} by hand`),
          },
          {
            kind: 'dead-owner',
            file: roots,
            workspace: broken,
            problem: expect.stringContaining('fix the findings above first'),
            fix: recoverFix(broken),
          },
        ],
      ],
      [
        privateRootOf(box, other),
        [
          {
            kind: 'dead-owner',
            file: roots,
            workspace: other,
            problem: expect.stringContaining(`the owner of ${other} is gone`),
            fix: recoverFix(other),
          },
        ],
      ],
    ]);
    const { code, findings } = await doctor(box);
    expect(code).toBe(3);
    expect(findings).toEqual([
      {
        kind: 'stray-entry',
        file: stray,
        workspace: broken,
        problem: expect.stringContaining('stray'),
        fix: `rm -r ${stray}`,
      },
      ...[...perWorkspace.keys()].sort().flatMap((key) => perWorkspace.get(key)!),
    ]);
    const human = await cli(['doctor', '--state-home', box.stateHome]);
    expect(human.stdout).toContain(
      `${format}\n  workspace: ${broken}\n  problem:   ${findings.find(({ file }) => file === format)!.problem}\n`,
    );

    // Repaired by hand, as the fix says: then both are ordinary crashed owners, and recover.
    await applyFix(box, findings[0]!.fix); // the stray's rm
    writeFileSync(format, formatBytes);
    const repaired = await doctor(box);
    expect(repaired.findings.map(({ kind, workspace }) => ({ kind, workspace }))).toEqual(
      [...perWorkspace.keys()]
        .sort()
        .map((key) => ({ kind: 'dead-owner', workspace: key === privateRootOf(box, broken) ? broken : other })),
    );
    for (const finding of repaired.findings) await applyFix(box, finding.fix);
    await expectClean(box);
    await servesAgain(box, broken);
  });

  it('finds a workspace fenced by a dead owner of another PID namespace (it reads ambiguous), naming it and where to recover', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server } = await box.serve(workspace);
    await server.kill9();
    // The same owner as a container sharing this state home writes it: another PID namespace in every processStart.
    const inOtherNamespace = (value: Record<string, unknown>) => {
      value.processStart = String(value.processStart).replace(/^(linux:[0-9a-f-]{36}):[0-9]+:/, '$1:1:');
    };
    const roots = join(box.namespace, 'registry', 'roots.json');
    const privateRoot = privateRootOf(box, workspace);
    rewriteJson(roots, (value) => {
      for (const entry of value.entries as Record<string, unknown>[])
        if (entry.root === workspace) inOtherNamespace(entry);
    });
    rewriteJson(join(privateRoot, 'service', 'registration.json'), inOtherNamespace);
    rewriteJson(join(privateRoot, 'checkout.lock'), inOtherNamespace);

    // recover cannot act here: it cannot prove that process gone.
    const shown = json(await cli(['recover', ...box.place(workspace), '--json']));
    expect(shown.ownerStatus).toBe('ambiguous');

    const { code, findings } = await doctor(box);
    expect(code).toBe(3);
    expect(findings).toEqual([
      {
        kind: 'ambiguous-owner',
        file: roots,
        workspace,
        problem: expect.stringContaining(
          `fenced by pid ${server.pid} on ${hostname()}, which this host cannot tell live or gone`,
        ),
        fix: `make sure pid ${server.pid} on ${hostname()} is gone, then, from inside the PID namespace (the container) it ran in: leasehold recover --workspace ${workspace} --state-home ${box.stateHome}`,
      },
    ]);
  });

  it.skipIf(!mountsAllowed('bindfs'))(
    'says the file system of a state home not made yet: tmpfs proven; FUSE and one it does not know, not proven, and a finding with its remedy; init says it too',
    async () => {
      const notProven = "(not proven: Leasehold's guarantees are not known to hold there)";
      const tmpfs = join(mountOn(makeTemporaryFolder('cli-tmpfs-'), 'mount', '-t', 'tmpfs', 'tmpfs'), 'state');
      const fuseSource = makeTemporaryFolder('cli-fuse-source-');
      const fuse = join(mountOn(makeTemporaryFolder('cli-fuse-'), 'bindfs', fuseSource), 'state');
      const ramfs = join(mountOn(makeTemporaryFolder('cli-ramfs-'), 'mount', '-t', 'ramfs', 'ramfs'), 'state');
      const cases = [
        [tmpfs, { name: 'tmpfs', magic: 0x01021994, proven: true }, 'tmpfs (local: proven)', ''],
        [fuse, { name: 'fuse', magic: 0x65735546, proven: false }, `fuse ${notProven}`, 'fuse'],
        [
          ramfs,
          { name: 'unknown', magic: 0x858458f6, proven: false },
          `unknown, magic 0x858458f6 ${notProven}`,
          '0x858458f6',
        ],
      ] as const;
      for (const [stateHome, fileSystem, words, allowAs] of cases) {
        const found = await cli(['doctor', '--state-home', stateHome, '--json']);
        const human = await cli(['doctor', '--state-home', stateHome]);
        const reported = { ...fileSystem, allowed: false };
        if (fileSystem.proven) {
          expect([found.code, json(found)]).toEqual([0, { fileSystem: reported, findings: [] }]);
          expect(human.stdout).toBe(`file system  ${words}\nno problem found in ${stateHome}\n`);
          const init = await cli(['init', '--state-home', stateHome, '--json']);
          expect(json(init)).toEqual({
            initialized: true,
            stateHome,
            backend: { kind: 'files' },
            fileSystem: reported,
          });
          expect((await cli(['init', '--state-home', stateHome])).stdout).toBe(
            `${stateHome} uses the file backend, on ${words}\n`,
          );
          continue;
        }
        // Every command would refuse it: doctor says so, with the remedy, before anything is made.
        const problem = `the state home is on ${fileSystem.name} (statfs magic 0x${fileSystem.magic.toString(16)}), a file system on which Leasehold's guarantees are not proven: every command that uses it is refused`;
        const fix = `keep the state home on a local disk (ext4, xfs, btrfs, tmpfs, overlay, f2fs, zfs, bcachefs); or, if every host that reaches it sees a rename at once, check that with \`leasehold doctor --verify-fs --state-home ${stateHome}\` and allow it with \`leasehold init --allow-fs ${allowAs} --state-home ${stateHome}\`, which runs that check first`;
        expect([found.code, json(found)]).toEqual([
          3,
          {
            fileSystem: reported,
            findings: [{ file: stateHome, problem, fix, kind: 'unproven-file-system', workspace: null }],
          },
        ]);
        expect(human.stdout).toBe(
          `file system  ${words}\n\n${stateHome}\n  problem:   ${problem}\n  fix:       ${fix}\n\n`,
        );
        expect(existsSync(stateHome)).toBe(false);
      }
    },
  );

  it.skipIf(!mountsAllowed('bindfs'))(
    'init refuses a state home on a file system not proven, and --allow-fs records it only once the check passed there',
    async () => {
      const ramfs = join(mountOn(makeTemporaryFolder('cli-allow-ramfs-'), 'mount', '-t', 'ramfs', 'ramfs'), 'state');
      const refused = await cli(['init', '--state-home', ramfs]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`${ramfs}: the state home is on unknown (statfs magic 0x858458f6)`);
      expect(refused.stderr).toContain(`leasehold init --allow-fs 0x858458f6 --state-home ${ramfs}`);
      expect(existsSync(ramfs)).toBe(false);
      // status tells the same story: its next step is that remedy, not a serve that would be refused.
      const workspace = makeTemporaryFolder('cli-allow-workspace-');
      const before = await cli(['status', '--workspace', workspace, '--state-home', ramfs]);
      expect(before.code).toBe(3);
      expect(before.stdout).toContain(
        `\n\nIts state home is refused where it is: keep the state home on a local disk (ext4, xfs, btrfs, tmpfs, overlay, f2fs, zfs, bcachefs); or, if every host that reaches it sees a rename at once, check that with \`leasehold doctor --verify-fs --state-home ${ramfs}\` and allow it with \`leasehold init --allow-fs 0x858458f6 --state-home ${ramfs}\`, which runs that check first\n`,
      );
      const wrong = await cli(['init', '--state-home', ramfs, '--allow-fs', 'nfs']);
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toContain('is on unknown (statfs magic 0x858458f6), not nfs');
      const said = await cli(['init', '--state-home', ramfs, '--allow-fs', '0x858458f6']);
      expect(said.stdout).toMatch(
        /^verified {2}unknown: 4 processes, 5 s, [0-9]+ increments, 0 lost, 0 torn: passed$/m,
      );
      expect(said.stdout).toContain(
        `${ramfs} uses the file backend, on unknown, magic 0x858458f6 (not proven; allowed here, its check passed)`,
      );
      const allowed = await cli(['init', '--state-home', ramfs, '--allow-fs', '0x858458f6', '--json']);
      expect(allowed.code).toBe(0);
      expect(json(allowed)).toMatchObject({
        initialized: true,
        fileSystem: { name: 'unknown', magic: 0x858458f6, proven: false, allowed: true },
        verifyFs: { passed: true, lostUpdates: 0, tornReads: 0 },
      });
      // From now on every command serves it, with no option: the state home records the allowance,
      // and status and doctor say it is allowed.
      const allowedWords = 'unknown, magic 0x858458f6 (not proven; allowed here, its check passed)';
      const status = await cli(['status', '--workspace', workspace, '--state-home', ramfs, '--json']);
      expect([status.code, json(status)]).toEqual([
        3,
        expect.objectContaining({
          status: 'absent',
          stateHome: ramfs,
          fileSystem: { name: 'unknown', magic: 0x858458f6, proven: false, allowed: true },
        }),
      ]);
      const statusWords = await cli(['status', '--workspace', workspace, '--state-home', ramfs]);
      expect(statusWords.stdout).toContain(`state home  ${ramfs}, on ${allowedWords}\n`);
      expect(statusWords.stdout).toContain(`Start it with: leasehold serve --workspace ${workspace}`);
      const doctor = await cli(['doctor', '--state-home', ramfs]);
      expect([doctor.code, doctor.stdout]).toEqual([0, `file system  ${allowedWords}\nno problem found in ${ramfs}\n`]);

      // On a FUSE passthrough the check fails (its link counts lag), so nothing is recorded.
      const fuse = join(
        mountOn(makeTemporaryFolder('cli-allow-fuse-'), 'bindfs', makeTemporaryFolder('cli-allow-src-')),
        'state',
      );
      const failed = await cli(['init', '--state-home', fuse, '--allow-fs', 'fuse']);
      expect(failed.code).toBe(1);
      expect(failed.stdout).toMatch(/^verified {2}fuse: 4 processes, 5 s, .*: failed$/m);
      expect(failed.stderr).toContain(`${fuse}: the check of fuse failed`);
      expect(existsSync(join(fuse, 'v1'))).toBe(false);
    },
  );

  it('leaks no capability in any output or state file of this test file', () => {
    expect(capabilitiesSeen.size).toBeGreaterThanOrEqual(9);
    expect(capabilityLeaks()).toEqual([]);
  });
});

describe('doctor --verify-fs', () => {
  /** What is left in the state home of the verifier's scratch folders: nothing. */
  function scratchLeft(stateHome: string): string[] {
    return readdirSync(stateHome).filter((name) => name.startsWith('.verify-fs-'));
  }

  it("races this very command's processes in the state home and passes: the figures, in JSON and in words", async () => {
    const box = sandbox();
    const verify = ['doctor', '--state-home', box.stateHome, '--verify-fs', '--seconds', '1', '--processes', '2'];
    const found = await cli([...verify, '--json']);
    const { verifyFs } = json(found) as { verifyFs: Record<string, unknown> };
    expect(found.code).toBe(0);
    expect(Object.keys(verifyFs)).toEqual([
      'fileSystem',
      'processes',
      'seconds',
      'increments',
      'finalValue',
      'lostUpdates',
      'tornReads',
      'errors',
      'passed',
    ]);
    expect(verifyFs).toMatchObject({ fileSystem: fileSystemOf(box.stateHome), processes: 2, seconds: 1 });
    expect(verifyFs).toMatchObject({ lostUpdates: 0, tornReads: 0, errors: [], passed: true });
    expect(verifyFs.increments).toBeGreaterThan(0);
    expect(verifyFs.finalValue).toBe(verifyFs.increments);
    const human = await cli(verify);
    expect(human.code).toBe(0);
    const name = fileSystemOf(box.stateHome).name;
    expect(human.stdout).toMatch(
      new RegExp(`^verified  ${name}: 2 processes, 1 s, [1-9][0-9]* increments, 0 lost, 0 torn: passed\\n$`),
    );
    expect(scratchLeft(box.stateHome)).toEqual([]);
  });

  it('is a usage error (exit 2) for a number out of range or not whole, or --processes/--seconds without --verify-fs', async () => {
    const box = sandbox();
    const cases = [
      [['--verify-fs', '--processes', '1'], '--processes 1: not a whole number from 2 to 64'],
      [['--verify-fs', '--processes', '65'], '--processes 65: not a whole number from 2 to 64'],
      [['--verify-fs', '--seconds', '601'], '--seconds 601: not a whole number from 1 to 600'],
      [['--verify-fs', '--seconds', 'x'], '--seconds x: not a whole number of at least 1'],
      [['--processes', '2'], '--processes: only with --verify-fs'],
      [['--seconds', '1'], '--seconds: only with --verify-fs'],
    ] as const;
    for (const [options, message] of cases) {
      const found = await cli(['doctor', '--state-home', box.stateHome, ...options, '--json']);
      expect([found.code, json(found)]).toEqual([2, { error: 'usage', message, remedy: expect.any(String) }]);
    }
    // Refused before anything is made: not even the state home.
    expect(existsSync(box.stateHome)).toBe(false);
  });

  it('is a usage error (exit 2) to start one of its racing workers by hand, naming the command that does', async () => {
    const found = await cli(['--verify-fs-worker']);
    expect([found.code, found.stdout]).toEqual([2, '']);
    expect(found.stderr).toBe(
      'leasehold: usage: --verify-fs-worker is one racing worker of doctor --verify-fs, not a command\n  run: leasehold doctor --verify-fs\n',
    );
  });

  // See private-files' verify-fs.test.ts: bindfs answers the lock's link count late.
  it.skipIf(!mountsAllowed('bindfs'))('fails (exit 3) on a bindfs FUSE passthrough, saying why', async () => {
    const source = makeTemporaryFolder('cli-verify-fuse-source-');
    const stateHome = join(mountOn(makeTemporaryFolder('cli-verify-fuse-'), 'bindfs', source), 'state');
    const found = await cli(['doctor', '--state-home', stateHome, '--verify-fs', '--seconds', '1', '--processes', '2']);
    expect(found.code).toBe(3);
    expect(found.stdout).toMatch(
      /^verified {2}fuse: 2 processes, 1 s, [0-9]+ increments, 0 lost, 0 torn: failed\n {2}error: /,
    );
    expect(scratchLeft(stateHome)).toEqual([]);
  });
});
