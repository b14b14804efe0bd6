import { randomUUID } from 'node:crypto';
import { ContractError } from '@leasehold/contracts';
import { killAndReap, messageOf } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  capabilityOf,
  inspectionOf,
  endTest,
  placeWithWorkspace,
  plainServer,
  servingOf,
  spawnOwner,
  witness,
  type ChildServing,
  type Place,
  filesOf,
} from '../test/helpers.js';
import { connect, type ConnectOptions } from './index.js';

afterEach(endTest);

/** The message of the `unavailable` ContractError that connect rejects with (anything else fails the test). */
async function unavailableReason(place: Place, options: Partial<ConnectOptions> = {}): Promise<string> {
  try {
    const connection = await connect(place.root, { ownership: filesOf(place), ...options });
    witness(connection);
  } catch (error) {
    witness(error);
    if (ContractError.is(error, 'unavailable')) return error.message;
    throw error;
  }
  throw new Error('connect resolved');
}

function portOf(serving: ChildServing): number {
  return Number(new URL(serving.endpoint).port);
}

/** An owner child that served and was then killed with SIGKILL: its files say it serves on its port. */
async function killedOwner(place: Place): Promise<ChildServing> {
  const child = spawnOwner(place);
  const serving = await servingOf(child);
  capabilityOf(place);
  await killAndReap(child);
  return serving;
}

describe('connect', () => {
  it('resolves { endpoint, epoch, status, request, stream } for a live owner, and request makes authenticated calls', async () => {
    const place = placeWithWorkspace();
    const child = spawnOwner(place);
    const serving = await servingOf(child);
    capabilityOf(place);
    const connection = await connect(place.root, { ownership: filesOf(place) });
    witness(connection);
    expect(connection.endpoint).toBe(serving.endpoint);
    expect(connection.epoch).toBe(serving.epoch);
    expect(connection.status).toEqual({ epoch: serving.epoch, phase: 'idle', root: place.root, pid: child.pid });
    expect(Object.keys(connection).sort()).toEqual(['endpoint', 'epoch', 'request', 'status', 'stream']);
    const hello = await connection.request('GET', '/hello');
    witness(hello);
    expect(hello.status).toBe(200);
    expect(hello.body).toEqual({ hello: 'world' });
    const status = await connection.request('GET', '/v1/status');
    expect(status.body).toEqual(connection.status);
    const missing = await connection.request('GET', '/missing');
    expect(missing.status).toBe(404);
    const stop = await connection.request('POST', '/v1/stop', {});
    witness(stop);
    expect(stop.status).toBe(202);
    expect((await messageOf(child, 'outcome')).outcome).toEqual({ reason: 'stop' });
    expect((await child.closed).code).toBe(0);
    expect(await unavailableReason(place)).toContain('not running (stopped)');
  });

  it('rejects unavailable for a workspace that never served', async () => {
    const place = placeWithWorkspace();
    expect(await unavailableReason(place)).toContain('not running (absent)');
    expect(await inspectionOf(place)).toEqual({ status: 'absent' });
  });

  it('rejects unavailable when the owner was killed (SIGKILL): no answer', async () => {
    const place = placeWithWorkspace();
    await killedOwner(place);
    expect(await unavailableReason(place)).toContain('no answer');
  });

  it('rejects unavailable when a listener on the recorded endpoint answers another epoch', async () => {
    const place = placeWithWorkspace();
    const serving = await killedOwner(place);
    await plainServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ epoch: randomUUID(), phase: 'idle', root: place.root, pid: serving.pid }));
    }, portOf(serving));
    expect(await unavailableReason(place)).toContain('another epoch answered');
  });

  it('rejects unavailable when a listener on the recorded endpoint refuses the capability, or never answers', async () => {
    const place = placeWithWorkspace();
    const serving = await killedOwner(place);
    let answer = true;
    await plainServer((_request, response) => {
      if (!answer) return; // holds the request: the client's own bound ends it
      response.writeHead(401, { 'www-authenticate': 'Bearer' });
      response.end();
    }, portOf(serving));
    expect(await unavailableReason(place)).toContain('answered 401');
    answer = false;
    expect(await unavailableReason(place, { timeoutMs: 100 })).toContain('no answer');
  });

  it('settles while a live owner is between two steps of its acquire, then succeeds once it goes on', async () => {
    const place = placeWithWorkspace();
    // Paused before it publishes its registration: its row, checkout lock, owner.lock and capability are there.
    const child = spawnOwner(place, { pauseAt: '/service/registration.json' });
    await messageOf(child, 'paused');
    const inspection = await inspectionOf(place);
    expect(inspection).toMatchObject({ status: 'unavailable', inProgress: true });
    capabilityOf(place);
    // With a short settling bound, it answers unavailable.
    expect(await unavailableReason(place, { settleMs: 50 })).toBeTruthy();
    // Started while the child is still paused, it settles until the child has acquired and answers.
    const connecting = connect(place.root, { ownership: filesOf(place), settleMs: 600_000 });
    child.send('go');
    const connection = await connecting;
    witness(connection);
    const serving = await servingOf(child);
    expect(connection.epoch).toBe(serving.epoch);
    expect(connection.status).toMatchObject({ epoch: serving.epoch, pid: child.pid, phase: 'idle' });
  });
});

describe('connect against a listener that stalls', () => {
  it('rejects unavailable when the answer starts and then stops coming', async () => {
    const place = placeWithWorkspace();
    const serving = await killedOwner(place);
    await plainServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"epoch":');
    }, portOf(serving));
    expect(await unavailableReason(place, { timeoutMs: 100 })).toContain('no answer');
  });
});
