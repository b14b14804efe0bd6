import { readFileSync, rmSync } from 'node:fs';
import {
  bytesOf,
  handPlaces,
  listingOutsideStaging,
  messageOf,
  pathExists,
  replaceFile,
  serviceFences,
} from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  capabilityOf,
  closeOf,
  connectionResult,
  inspectionOf,
  endTest,
  exchange,
  jsonBody,
  keptAlive,
  lineIndexOf,
  openSocket,
  placeWithWorkspace,
  plainServer,
  request,
  servingOf,
  spawnOwner,
} from '../test/helpers.js';

afterEach(endTest);

function portOf(endpoint: string): number {
  return Number(new URL(endpoint).port);
}

describe('the owner life cycle in its own process', () => {
  it('on SIGTERM goes stopping, drains the request in flight, releases and exits 0; the workspace is then stopped', async () => {
    const place = placeWithWorkspace();
    const child = spawnOwner(place);
    const serving = await servingOf(child);
    expect(serving).toMatchObject({ root: place.root, pid: child.pid });
    const port = portOf(serving.endpoint);
    const capability = capabilityOf(place);
    const held = exchange(port, request('GET', '/hold', port, capability));
    await messageOf(child, 'holding');
    child.process.kill('SIGTERM');
    // Its own listener runs after serveOwner's: by then the phase is stopping and the listener closed.
    await messageOf(child, 'signalled');
    expect(await inspectionOf(place)).toMatchObject({
      status: 'stopping',
      owner: { epoch: serving.epoch, pid: child.pid },
    });
    expect(await connectionResult(port)).toBe('ECONNREFUSED');
    expect(child.lines.some((line) => line.includes('outcome'))).toBe(false);
    child.send('answer');
    expect(jsonBody(await held)).toEqual({ held: true });
    expect((await messageOf(child, 'outcome')).outcome).toEqual({ reason: 'signal', signal: 'SIGTERM' });
    expect((await child.closed).code).toBe(0);
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: serving.epoch });
    expect(serviceFences(place.stateHome, place.root)).toEqual([]);
  });

  it('on SIGINT does the same', async () => {
    const place = placeWithWorkspace();
    const child = spawnOwner(place);
    const serving = await servingOf(child);
    child.process.kill('SIGINT');
    expect((await messageOf(child, 'outcome')).outcome).toEqual({ reason: 'signal', signal: 'SIGINT' });
    expect((await child.closed).code).toBe(0);
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: serving.epoch });
  });

  it('on POST /v1/stop with the right token answers 202, releases and exits 0', async () => {
    const place = placeWithWorkspace();
    const child = spawnOwner(place);
    const serving = await servingOf(child);
    const port = portOf(serving.endpoint);
    const capability = capabilityOf(place);
    const refused = await exchange(
      port,
      request(
        'POST',
        '/v1/stop',
        port,
        capability.replace(/^./, (first) => (first === 'A' ? 'B' : 'A')),
      ),
    );
    expect(refused.status).toBe(401);
    const stop = await exchange(port, request('POST', '/v1/stop', port, capability));
    expect(stop.status).toBe(202);
    expect(jsonBody(stop)).toEqual({
      epoch: serving.epoch,
      phase: 'idle',
      root: place.root,
      pid: child.pid,
      stopping: true,
    });
    expect((await messageOf(child, 'outcome')).outcome).toEqual({ reason: 'stop' });
    expect((await child.closed).code).toBe(0);
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: serving.epoch });
    expect(serviceFences(place.stateHome, place.root)).toEqual([]);
  });

  it('honours a SIGTERM sent during acquire only after acquire: it acquires whole, then stops cleanly', async () => {
    const place = placeWithWorkspace();
    const child = spawnOwner(place, { signalAt: 'first' });
    const sent = (await messageOf(child, 'signalledSelf')).signalledSelf as { path: string };
    expect(sent.path.startsWith(place.stateHome)).toBe(true);
    const serving = await servingOf(child);
    expect((await messageOf(child, 'outcome')).outcome).toEqual({ reason: 'signal', signal: 'SIGTERM' });
    expect((await child.closed).code).toBe(0);
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: serving.epoch });
    expect(serviceFences(place.stateHome, place.root)).toEqual([]);
  });

  it('honours a SIGTERM handled while acquire waits for the registry lock only after acquire; answers 503 until then', async () => {
    const place = placeWithWorkspace();
    const { server, port } = await plainServer(() => {});
    await new Promise((closed) => server.close(closed));
    // At its first link of registry.lock the child signals itself and puts a live holder's lock there by hand,
    // so acquire waits (on timers: the signal is handled meanwhile) until this test removes that lock.
    const child = spawnOwner(place, { contend: true, lockWaitMs: 600_000, endpoint: `http://127.0.0.1:${port}` });
    await messageOf(child, 'contended');
    await messageOf(child, 'signalled');
    expect(lineIndexOf(child, 'serving')).toBe(-1);
    // Bound but not yet the owner: a request is answered at once, vouching for nothing.
    const early = await exchange(port, request('GET', '/v1/status', port));
    expect({ status: early.status, body: jsonBody(early) }).toEqual({ status: 503, body: { error: 'starting' } });
    const { registryLock } = handPlaces(place.stateHome, place.root);
    expect(jsonOf(registryLock)).toMatchObject({ pid: child.pid });
    rmSync(registryLock);
    const serving = await servingOf(child);
    expect(lineIndexOf(child, 'signalled')).toBeLessThan(lineIndexOf(child, 'serving'));
    expect((await messageOf(child, 'outcome')).outcome).toEqual({ reason: 'signal', signal: 'SIGTERM' });
    expect((await child.closed).code).toBe(0);
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: serving.epoch });
    expect(serviceFences(place.stateHome, place.root)).toEqual([]);
    expect(pathExists(registryLock)).toBe(false);
  });

  it('when the lease is lost, closes the listener at once, reports the error, touches no file, exits non-zero', async () => {
    const place = placeWithWorkspace();
    const child = spawnOwner(place, { watchIntervalMs: 10, holdAfterError: true });
    const serving = await servingOf(child);
    const port = portOf(serving.endpoint);
    const capability = capabilityOf(place);
    const kept = await openSocket(port);
    expect((await exchange(kept, keptAlive('GET', '/v1/status', port, capability))).status).toBe(200);
    // A hand rewrites registration.json under the running owner.
    const { registration } = handPlaces(place.stateHome, place.root);
    const changed = {
      ...(JSON.parse(readFileSync(registration, 'utf8')) as Record<string, unknown>),
      phase: 'quarantined',
    };
    replaceFile(place.base, registration, bytesOf(JSON.stringify(changed)));
    const afterRewrite = listingOutsideStaging(place.stateHome);
    const reported = await messageOf(child, 'error');
    expect(typeof reported.error).toBe('string');
    expect(reported.error).not.toBe('not a ContractError');
    // Still alive, and no longer listening; the kept-alive connection was dropped.
    expect(child.process.exitCode).toBeNull();
    await closeOf(kept);
    expect(await connectionResult(port)).toBe('ECONNREFUSED');
    expect(listingOutsideStaging(place.stateHome)).toEqual(afterRewrite);
    child.send('exit');
    const end = await child.closed;
    expect(end.code).not.toBe(0);
    expect(lineIndexOf(child, 'outcome')).toBe(-1);
    expect(listingOutsideStaging(place.stateHome)).toEqual(afterRewrite);
    // The fences it left stay for recovery.
    expect(['stopped', 'absent']).not.toContain((await inspectionOf(place)).status);
  });
});

function jsonOf(path: string): unknown {
  return JSON.parse(readFileSync(path, 'utf8')) as unknown;
}
