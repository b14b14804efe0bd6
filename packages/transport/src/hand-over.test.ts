import { codeOfAsync, messageOf, messagesOf, serviceFences } from '@leasehold/test-utils';
import { afterEach, describe, expect, it } from 'vitest';
import {
  acquireFor,
  capabilityOf,
  endTest,
  exchange,
  filesOf,
  inspectionOf,
  jsonBody,
  placeWithWorkspace,
  plainServer,
  requestBytes,
  serveHere,
  servingOf,
  spawnOwner,
  witness,
  type Place,
} from '../test/helpers.js';
import {
  askHandOver,
  connect,
  ContractError,
  handOverReasonProblem,
  type HandOverDecision,
  type HandOverRequest,
} from './index.js';

afterEach(endTest);

/** Asks the place's owner to hand over, through `connect` and `askHandOver`: the answer, or the error. */
async function ask(place: Place, request?: HandOverRequest): Promise<{ decision?: string; error?: ContractError }> {
  const connection = await connect(place.root, { ownership: filesOf(place) });
  try {
    return await askHandOver(connection, request);
  } catch (error) {
    witness(error);
    if (!ContractError.is(error)) throw error;
    return { error };
  }
}

/** An owner of the place in this process that records every hand-over asked of it, and would release. */
async function recordingOwner(place: Place) {
  const asked: HandOverRequest[] = [];
  const owner = await serveHere(place, {
    onHandOverRequested: (request) => {
      asked.push(request);
      return { decision: 'release' };
    },
  });
  return { owner, asked };
}

/** `POST /v1/hand-over` with `body` as written, the right Host and, unless told otherwise, the bearer. */
function handOverRequest(port: number, body: string, token?: string): string {
  return requestBytes(
    'POST /v1/hand-over HTTP/1.1',
    [
      ['Host', `127.0.0.1:${port}`],
      ...(token === undefined ? [] : [['Authorization', `Bearer ${token}`] as const]),
      ['Connection', 'close'],
      ['Content-Type', 'application/json'],
      ['Content-Length', String(Buffer.byteLength(body))],
    ],
    body,
  );
}

describe('a hand-over asked of an owner in its own process', () => {
  it("refused: the asker gets the owner's reason (conflict, with a remedy); the owner serves on, nothing kept", async () => {
    const place = placeWithWorkspace();
    const child = spawnOwner(place, { handOver: 'refuse', refuseReason: 'indexing the monorepo: 3 minutes left' });
    const serving = await servingOf(child);
    const { error } = await ask(place, { reason: 'the nightly build needs it' });
    expect(error).toMatchObject({
      code: 'conflict',
      message: `${place.root}: its owner refused to hand it over: indexing the monorepo: 3 minutes left`,
    });
    expect(error?.remedy).toMatch(/^wait until the owner is done and ask again, or stop it regardless: leasehold stop/);
    expect((await messageOf(child, 'handOverAsked')).handOverAsked).toEqual({ reason: 'the nightly build needs it' });
    // Still the owner, and its status shows no hand-over: a refusal is not kept.
    const again = await connect(place.root, { ownership: filesOf(place) });
    expect(again.status).toEqual({ epoch: serving.epoch, phase: 'idle', root: place.root, pid: child.pid });
    expect(await inspectionOf(place)).toMatchObject({ status: 'unavailable', owner: { epoch: serving.epoch } });
    expect(child.process.exitCode).toBeNull();
  });

  it('released: answered release, the owner stops as on a stop and the workspace is free', async () => {
    const place = placeWithWorkspace();
    const child = spawnOwner(place, { handOver: 'release' });
    const serving = await servingOf(child);
    expect(await ask(place, { reason: 'my turn' })).toEqual({ decision: 'release' });
    expect((await messageOf(child, 'outcome')).outcome).toEqual({ reason: 'stop' });
    expect((await child.closed).code).toBe(0);
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: serving.epoch });
    expect(serviceFences(place.stateHome, place.root)).toEqual([]);
  });

  it('release-after: answered at once, shown in its status, the work finished, then stopped', async () => {
    const place = placeWithWorkspace();
    const child = spawnOwner(place, { handOver: 'release-after' });
    const serving = await servingOf(child);
    expect(await ask(place, { reason: 'the nightly build needs it' })).toEqual({ decision: 'release-after' });
    // Accepted and not yet released: still serving, its status says so; asked again, the same answer, not decided twice.
    const meanwhile = await connect(place.root, { ownership: filesOf(place) });
    expect(meanwhile.status).toEqual({
      epoch: serving.epoch,
      phase: 'idle',
      root: place.root,
      pid: child.pid,
      handOver: { asked: true, reason: 'the nightly build needs it', decision: 'release-after' },
    });
    expect(await ask(place)).toEqual({ decision: 'release-after' });
    expect(messagesOf(child, 'handOverAsked')).toHaveLength(1);
    expect(messagesOf(child, 'outcome')).toEqual([]);
    child.send('finish');
    await messageOf(child, 'workDone');
    expect((await messageOf(child, 'outcome')).outcome).toEqual({ reason: 'stop' });
    expect((await child.closed).code).toBe(0);
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: serving.epoch });
    expect(serviceFences(place.stateHome, place.root)).toEqual([]);
  });

  it('without onHandOverRequested, the owner releases: it has no work to finish', async () => {
    const place = placeWithWorkspace();
    const child = spawnOwner(place);
    const serving = await servingOf(child);
    expect(await ask(place)).toEqual({ decision: 'release' });
    expect((await messageOf(child, 'outcome')).outcome).toEqual({ reason: 'stop' });
    expect((await child.closed).code).toBe(0);
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: serving.epoch });
  });

  it('a callback that throws is a refusal saying the owner could not decide, never its error; it serves on', async () => {
    const place = placeWithWorkspace();
    const child = spawnOwner(place, { handOver: 'throw' });
    await servingOf(child);
    const { error } = await ask(place);
    expect(error).toMatchObject({
      code: 'conflict',
      message: `${place.root}: its owner refused to hand it over: the owner could not decide on a hand-over: its onHandOverRequested failed`,
    });
    expect(error?.message).not.toContain('cannot tell');
    expect((await connect(place.root, { ownership: filesOf(place) })).status.handOver).toBeUndefined();
    expect(child.process.exitCode).toBeNull();
  });
});

describe('POST /v1/hand-over on the wire', () => {
  it('without the capability, or with a wrong one: 401, nobody asked, nothing changed', async () => {
    const place = placeWithWorkspace();
    const { owner, asked } = await recordingOwner(place);
    const capability = capabilityOf(place);
    for (const token of [undefined, capability.slice(1)]) {
      const refused = await exchange(owner.port, handOverRequest(owner.port, '{"reason":"mine"}', token));
      expect(refused.status).toBe(401);
    }
    expect(asked).toEqual([]);
    expect(owner.settled()).toBe(false);
    expect((await connect(place.root, { ownership: filesOf(place) })).status.handOver).toBeUndefined();
  });

  it('a malformed body: 400 naming what is wrong (never the value), nobody asked, nothing changed', async () => {
    const place = placeWithWorkspace();
    const { owner, asked } = await recordingOwner(place);
    const capability = capabilityOf(place);
    const bodies: Array<[string, string]> = [
      ['reason: mine', 'the body is not JSON (body: invalid JSON at $ (offset 0))'],
      ['{"reason":"a","reason":"b"}', 'the body is not JSON (body: duplicate key at $.reason (offset 22))'],
      ['["mine"]', 'the body is not a JSON object'],
      ['null', 'the body is not a JSON object'],
      ['{"reason":"mine","force":true}', 'the body has a key other than "reason"'],
      ['{"reason":42}', 'reason: not a string'],
      ['{"reason":""}', 'reason: 0 characters, not 1 to 200'],
      [JSON.stringify({ reason: 'x'.repeat(201) }), 'reason: 201 characters, not 1 to 200'],
      [
        JSON.stringify({ reason: 'two\nlines' }),
        'reason: holds a control or format character (a newline, an escape, ...)',
      ],
      [
        JSON.stringify({ reason: '\u001b[31mred' }),
        'reason: holds a control or format character (a newline, an escape, ...)',
      ],
      [
        JSON.stringify({ reason: 'abc\u202edcba' }),
        'reason: holds a control or format character (a newline, an escape, ...)',
      ],
    ];
    for (const [body, problem] of bodies) {
      const reply = await exchange(owner.port, handOverRequest(owner.port, body, capability));
      expect({ body, status: reply.status, answer: jsonBody(reply) }).toEqual({
        body,
        status: 400,
        answer: { error: `bad request: ${problem}` },
      });
    }
    // Invalid UTF-8 is no JSON either.
    const bytes = Buffer.concat([
      Buffer.from(handOverRequest(owner.port, '{"reason":"?"}', capability).slice(0, -3)),
      Buffer.from([0xff, 0x22, 0x7d]),
    ]);
    expect((await exchange(owner.port, bytes)).status).toBe(400);
    expect(asked).toEqual([]);
    expect(owner.settled()).toBe(false);
    expect((await connect(place.root, { ownership: filesOf(place) })).status.handOver).toBeUndefined();
    // A reason of 200 characters, not all ASCII, is one.
    const longest = 'é'.repeat(199) + '✓';
    const accepted = await exchange(
      owner.port,
      handOverRequest(owner.port, JSON.stringify({ reason: longest }), capability),
    );
    expect({ status: accepted.status, answer: jsonBody(accepted) }).toEqual({
      status: 202,
      answer: { decision: 'release' },
    });
    expect(asked).toEqual([{ reason: longest }]);
    expect(await owner.ended).toEqual({ outcome: { reason: 'stop' } });
  });

  it('answers 405 with Allow to another method, and 409 { error, reason } to a refusal', async () => {
    const place = placeWithWorkspace();
    const owner = await serveHere(place, {
      onHandOverRequested: () => ({ decision: 'refuse', reason: 'busy until noon' }),
    });
    const capability = capabilityOf(place);
    const get = await exchange(
      owner.port,
      requestBytes('GET /v1/hand-over HTTP/1.1', [
        ['Host', `127.0.0.1:${owner.port}`],
        ['Authorization', `Bearer ${capability}`],
        ['Connection', 'close'],
      ]),
    );
    expect({ status: get.status, allow: get.headers.allow }).toEqual({ status: 405, allow: 'POST' });
    const refused = await exchange(owner.port, handOverRequest(owner.port, '', capability));
    expect({ status: refused.status, answer: jsonBody(refused) }).toEqual({
      status: 409,
      answer: { error: 'conflict', reason: 'busy until noon' },
    });
    expect(owner.settled()).toBe(false);
  });

  it('a callback answering no decision, or a refusal without a printable reason, refuses: the owner could not decide', async () => {
    const place = placeWithWorkspace();
    const answers: unknown[] = [
      undefined,
      { decision: 'later' },
      { decision: 'release-after' }, // no work to wait for
      { decision: 'refuse', reason: '' },
      { decision: 'refuse', reason: 'a\nb' },
    ];
    let next = 0;
    const owner = await serveHere(place, {
      onHandOverRequested: () => Promise.resolve(answers[next++] as HandOverDecision),
    });
    const reasons: string[] = [];
    for (let index = 0; index < answers.length; index += 1) {
      const { error } = await ask(place);
      expect(error?.code).toBe('conflict');
      reasons.push(error!.message.replace(`${place.root}: its owner refused to hand it over: `, ''));
    }
    expect(reasons).toEqual([
      'the owner could not decide on a hand-over: its onHandOverRequested answered no decision',
      'the owner could not decide on a hand-over: its onHandOverRequested answered no decision',
      'the owner could not decide on a hand-over: its onHandOverRequested answered no decision',
      "the owner could not decide on a hand-over: its refusal's reason: 0 characters, not 1 to 200",
      "the owner could not decide on a hand-over: its refusal's reason: holds a control or format character (a newline, an escape, ...)",
    ]);
    expect(owner.settled()).toBe(false);
  });

  it('release-after: a stop meanwhile still stops, without waiting for the work', async () => {
    const place = placeWithWorkspace();
    const owner = await serveHere(place, {
      onHandOverRequested: () => ({ decision: 'release-after', work: new Promise(() => {}) }),
    });
    expect(await ask(place)).toEqual({ decision: 'release-after' });
    const connection = await connect(place.root, { ownership: filesOf(place) });
    expect(connection.status.handOver).toEqual({ asked: true, decision: 'release-after' });
    expect((await connection.request('POST', '/v1/stop')).status).toBe(202);
    expect(await owner.ended).toEqual({ outcome: { reason: 'stop' } });
    expect(await inspectionOf(place)).toMatchObject({ status: 'stopped', epoch: owner.serving.epoch });
  });

  it('decides one request at a time: two asks at once call the owner once, and both hear its decision', async () => {
    const place = placeWithWorkspace();
    let calls = 0;
    let finish: () => void = () => {};
    const work = new Promise<void>((resolve) => (finish = resolve));
    const owner = await serveHere(place, {
      onHandOverRequested: async () => {
        calls += 1;
        return { decision: 'release-after', work };
      },
    });
    const both = await Promise.all([ask(place, { reason: 'first' }), ask(place, { reason: 'second' })]);
    expect(both).toEqual([{ decision: 'release-after' }, { decision: 'release-after' }]);
    expect(calls).toBe(1);
    finish();
    expect(await owner.ended).toEqual({ outcome: { reason: 'stop' } });
  });
});

describe('askHandOver', () => {
  it('refuses a reason that is not 1 to 200 printable characters before sending anything', async () => {
    const place = placeWithWorkspace();
    const { owner, asked } = await recordingOwner(place);
    const connection = await connect(place.root, { ownership: filesOf(place) });
    for (const reason of ['', 'x'.repeat(201), 'tab\there']) {
      expect(await codeOfAsync(askHandOver(connection, { reason }))).toBe('refused');
    }
    expect(asked).toEqual([]);
    expect(owner.settled()).toBe(false);
  });

  it('an owner built before hand-overs (404 on the route): refused, naming why, the stop as its remedy', async () => {
    const place = placeWithWorkspace();
    let epoch = '';
    const { port } = await plainServer((request, response) => {
      if (request.url !== '/v1/status') return void response.writeHead(404).end();
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ epoch, phase: 'idle', root: place.root, pid: process.pid }));
    });
    const lease = await acquireFor(place, port);
    epoch = lease.owner.epoch;
    const { error } = await ask(place, { reason: 'mine' });
    expect(error).toMatchObject({
      code: 'refused',
      message: `${place.root}: its owner takes no hand-over requests (it answered 404: it was built on an earlier @leasehold/transport)`,
    });
    expect(error?.remedy).toMatch(/^stop it regardless: leasehold stop --workspace /);
    await lease.release();
  });

  it('handOverReasonProblem: undefined for a reason, what is wrong otherwise', () => {
    expect(handOverReasonProblem('deploying: back at 14:00 ✓')).toBeUndefined();
    expect(handOverReasonProblem(undefined)).toBe('not a string');
    expect(handOverReasonProblem('\u0000')).toBe('holds a control or format character (a newline, an escape, ...)');
    expect(handOverReasonProblem('\ud800')).toBe('holds a control or format character (a newline, an escape, ...)');
  });
});
