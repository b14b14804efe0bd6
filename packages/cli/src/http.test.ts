import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server as NetServer, connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cli,
  httpRequest,
  json,
  killAll,
  removeSandboxes,
  sandbox,
  type Sandbox,
  onLocalDisk,
} from '../test/helpers.js';
import { capabilityLeaks } from '../test/transcript.js';

const listeners: NetServer[] = [];

afterEach(async () => {
  await killAll();
  await Promise.all(listeners.splice(0).map((listener) => new Promise((resolve) => listener.close(resolve))));
  removeSandboxes();
  // After every test, alone or not: no capability seen so far is in any output, answer or state file.
  expect(capabilityLeaks()).toEqual([]);
});

/** The one capability file of the sandbox, read as a client with file access would. */
function capabilityOf(box: Sandbox): { epoch: string; capability: string } {
  const found = box.capabilities();
  expect(found).toHaveLength(1);
  return found[0]!;
}

/** Outcome of a TCP connect: 'connected' or the errno. */
function tryConnect(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.setTimeout(10_000, () => {
      socket.destroy();
      resolve('timeout');
    });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
  });
}

/** Listening TCP sockets on `port` in /proc/net/tcp or tcp6, as `ADDRESS:PORT` in the kernel's hex. */
function listenersOn(file: string, port: number): string[] {
  const portHex = port.toString(16).toUpperCase().padStart(4, '0');
  return readFileSync(file, 'utf8')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields.length > 3 && fields[3] === '0A' && fields[1]!.endsWith(`:${portHex}`))
    .map((fields) => fields[1]!);
}

function externalIPv4(): string | undefined {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) if (address.family === 'IPv4' && !address.internal) return address.address;
  }
  return undefined;
}

describe('the HTTP transport of leasehold serve', () => {
  it('answers only the right token with the right Host, on the right route and method', async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server, ready } = await box.serve(workspace);
    const { epoch, capability } = capabilityOf(box);
    expect(epoch).toBe(ready.epoch);
    const port = new URL(ready.endpoint).port;
    const host = `127.0.0.1:${port}`;
    const bearer = `Bearer ${capability}`;

    const ok = await httpRequest(ready.endpoint, 'GET', '/v1/status', { host, authorization: bearer });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toEqual({ epoch: ready.epoch, phase: 'idle', root: workspace, pid: server.pid });
    expect(ok.headers['cache-control']).toBe('no-store');
    // A query string does not change the route.
    expect((await httpRequest(ready.endpoint, 'GET', '/v1/status?x=1', { host, authorization: bearer })).status).toBe(
      200,
    );

    // No token, a wrong token, a malformed header: 401, and nothing about the service.
    const otherToken = capability.startsWith('A') ? `B${capability.slice(1)}` : `A${capability.slice(1)}`;
    for (const headers of [
      { host },
      { host, authorization: `Bearer ${otherToken}` },
      { host, authorization: `Bearer ${capability}x` },
      { host, authorization: `Bearer ${capability.slice(0, -1)}` },
      { host, authorization: `bearer ${capability}` },
      { host, authorization: `Basic ${Buffer.from(`user:${capability}`).toString('base64')}` },
      { host, authorization: 'Bearer ' },
    ]) {
      const denied = await httpRequest(ready.endpoint, 'GET', '/v1/status', headers);
      expect(denied.status, JSON.stringify(Object.keys(headers))).toBe(401);
      expect(JSON.parse(denied.body)).toEqual({ error: 'unauthorized' });
      expect(denied.headers['www-authenticate']).toBe('Bearer');
    }

    // Another Host, even with the right token: 421 (DNS rebinding defence).
    for (const other of [
      `localhost:${port}`,
      'evil.example',
      `evil.example:${port}`,
      '127.0.0.1',
      `127.0.0.1:${Number(port) + 1}`,
      `[::1]:${port}`,
    ]) {
      const misdirected = await httpRequest(ready.endpoint, 'GET', '/v1/status', {
        host: other,
        authorization: bearer,
      });
      expect(misdirected.status, other).toBe(421);
      expect(JSON.parse(misdirected.body)).toEqual({ error: 'misdirected request' });
    }
    // HTTP/1.1 without a Host header: node's server answers 400 before any handler runs.
    expect((await httpRequest(ready.endpoint, 'GET', '/v1/status', { authorization: bearer })).status).toBe(400);
    // The Host check comes first: a rebinding page learns nothing about tokens.
    expect((await httpRequest(ready.endpoint, 'GET', '/v1/status', { host: 'evil.example' })).status).toBe(421);

    // Unknown path: 404. Wrong method: 405 with Allow.
    for (const path of ['/', '/v1', '/v1/status/', '/v2/status', '/v1/stat', '/V1/STATUS']) {
      const missing = await httpRequest(ready.endpoint, 'GET', path, { host, authorization: bearer });
      expect(missing.status, path).toBe(404);
    }
    const postStatus = await httpRequest(ready.endpoint, 'POST', '/v1/status', { host, authorization: bearer });
    expect(postStatus.status).toBe(405);
    expect(postStatus.headers.allow).toBe('GET');
    const getStop = await httpRequest(ready.endpoint, 'GET', '/v1/stop', { host, authorization: bearer });
    expect(getStop.status).toBe(405);
    expect(getStop.headers.allow).toBe('POST');
    for (const method of ['PUT', 'DELETE', 'HEAD']) {
      expect(
        (await httpRequest(ready.endpoint, method, '/v1/stop', { host, authorization: bearer })).status,
        method,
      ).toBe(405);
    }
    // A stop without the right token or Host stops nothing.
    expect(
      (await httpRequest(ready.endpoint, 'POST', '/v1/stop', { host, authorization: `Bearer ${otherToken}` })).status,
    ).toBe(401);
    expect(
      (await httpRequest(ready.endpoint, 'POST', '/v1/stop', { host: 'evil.example', authorization: bearer })).status,
    ).toBe(421);
    const stillRunning = await cli(['status', ...box.place(workspace), '--json']);
    expect(stillRunning.code).toBe(0);
    expect(json(stillRunning).epoch).toBe(ready.epoch);

    // The authenticated stop: 202, and the server ends cleanly.
    // (Asked as a keep-alive client would, as the CLI's own client does with node's default agent.)
    const stop = await httpRequest(ready.endpoint, 'POST', '/v1/stop', {
      host,
      authorization: bearer,
      connection: 'keep-alive',
    });
    expect(stop.status).toBe(202);
    // The phase as it was when the answer was written: the stop begins right after.
    expect(JSON.parse(stop.body)).toEqual({
      epoch: ready.epoch,
      phase: expect.stringMatching(/^(idle|stopping)$/),
      root: workspace,
      pid: server.pid,
      stopping: true,
    });
    // The server is going away: it tells the client not to keep the connection, so its drain does not wait on it.
    expect(stop.headers.connection).toBe('close');
    const ended = await server.exit();
    expect(ended.code).toBe(0);
    const stopped = await cli(['status', ...box.place(workspace), '--json']);
    expect(json(stopped)).toEqual({
      status: 'stopped',
      ...onLocalDisk(box.stateHome),
      root: workspace,
      epoch: ready.epoch,
      config: expect.any(Object),
    });
  });

  it("refuses the previous epoch's capability", async () => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { server: first, ready: firstReady } = await box.serve(workspace);
    const old = capabilityOf(box);
    expect(old.epoch).toBe(firstReady.epoch);
    expect(json(await cli(['stop', ...box.place(workspace), '--json']))).toEqual({
      stopped: true,
      root: workspace,
      epoch: firstReady.epoch,
    });
    expect((await first.exit()).code).toBe(0);
    expect(box.capabilities()).toEqual([]);

    const { ready } = await box.serve(workspace);
    const current = capabilityOf(box);
    expect(current.epoch).toBe(ready.epoch);
    expect(current.epoch).not.toBe(old.epoch);
    expect(current.capability).not.toBe(old.capability);
    const host = `127.0.0.1:${new URL(ready.endpoint).port}`;
    const stale = await httpRequest(ready.endpoint, 'GET', '/v1/status', {
      host,
      authorization: `Bearer ${old.capability}`,
    });
    expect(stale.status).toBe(401);
    const staleStop = await httpRequest(ready.endpoint, 'POST', '/v1/stop', {
      host,
      authorization: `Bearer ${old.capability}`,
    });
    expect(staleStop.status).toBe(401);
    const fresh = await httpRequest(ready.endpoint, 'GET', '/v1/status', {
      host,
      authorization: `Bearer ${current.capability}`,
    });
    expect(fresh.status).toBe(200);
    expect(JSON.parse(fresh.body)).toMatchObject({ epoch: ready.epoch, phase: 'idle' });
  });

  it('listens on 127.0.0.1 only', async (context) => {
    const box = sandbox();
    const workspace = box.workspace('ws');
    const { ready } = await box.serve(workspace);
    const port = Number(new URL(ready.endpoint).port);

    // The kernel's table: one listener on this port, bound to 127.0.0.1 (0100007F), none on IPv6.
    expect(listenersOn('/proc/net/tcp', port)).toEqual([
      `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`,
    ]);
    expect(listenersOn('/proc/net/tcp6', port)).toEqual([]);
    const ss = spawnSync('ss', ['-Hltn', `sport = :${port}`], { encoding: 'utf8' });
    if (ss.status === 0) {
      const locals = ss.stdout
        .trim()
        .split('\n')
        .map((line) => line.trim().split(/\s+/)[3]);
      expect(locals).toEqual([`127.0.0.1:${port}`]);
    }
    expect(await tryConnect('127.0.0.1', port)).toBe('connected');

    const external = externalIPv4();
    if (external === undefined) {
      context.skip('this machine has no non-loopback IPv4 address to probe from');
      return;
    }
    // Control: a listener on every address is reachable through that address, so the probe can tell.
    const control = createServer((socket) => socket.destroy());
    listeners.push(control);
    await new Promise<void>((resolve) => control.listen(0, '0.0.0.0', resolve));
    const controlPort = (control.address() as { port: number }).port;
    const controlOutcome = await tryConnect(external, controlPort);
    if (controlOutcome !== 'connected') {
      context.skip(
        `${external} is not reachable from here even for a listener on every address (${controlOutcome}): the probe cannot tell`,
      );
      return;
    }
    // The service is not.
    expect(await tryConnect(external, port)).toBe('ECONNREFUSED');
  });
});
