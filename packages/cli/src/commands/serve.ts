import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ContractError, anyPortEndpoint } from '@leasehold/contracts';
import { ServiceCoordination, type OwnerLease } from '@leasehold/coordination';
import { placeOptions, stateHomeOf, workspaceOf, type CommandContext } from '../context.js';
import { table } from '../output.js';
import { POLICY_BYTES, serveConfig } from '../policy.js';
import { addressOf, transportHandler } from '../transport.js';

/** Exit status of a server whose lease was lost: it stopped serving and touched nothing. */
export const LEASE_LOST_EXIT = 4;

function listen(server: Server, port: number, hostname: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      const code = error.code === 'EADDRINUSE' ? 'conflict' : 'refused';
      reject(new ContractError(code, `${hostname}:${port}: cannot listen (${error.code ?? 'error'})`));
    });
    server.listen(port, hostname, () => resolve((server.address() as AddressInfo).port));
  });
}

function boundEndpoint(hostname: string, port: number): string {
  return `http://${hostname === '::1' ? '[::1]' : hostname}:${port}`;
}

/**
 * `leasehold serve`: bind the loopback listener first, acquire with the bound
 * endpoint, serve `/v1/status` and `/v1/stop`, and stop cleanly on SIGINT,
 * SIGTERM or an authenticated stop (phase `stopping`, drain, release). A lost
 * lease closes the listener and exits non-zero without touching any file.
 */
export async function serve(context: CommandContext): Promise<number> {
  const { output, values } = context;
  const root = workspaceOf(context);
  const stateHome = stateHomeOf(context);
  const requested = typeof values.endpoint === 'string' ? values.endpoint : 'http://127.0.0.1:0';
  if (!anyPortEndpoint.safeParse(requested).success) {
    throw new ContractError('refused', '--endpoint: not http://127.0.0.1:PORT or http://[::1]:PORT');
  }
  const watchMs = Number(values['watch-ms'] ?? 1000);
  if (!Number.isInteger(watchMs) || watchMs < 10) throw new ContractError('refused', '--watch-ms: not a whole number of at least 10');
  const address = addressOf(requested);
  const server = createServer();
  const port = await listen(server, address.port, address.hostname);
  const bound = boundEndpoint(address.hostname, port);
  const coordination = new ServiceCoordination(root, { stateHome });
  let lease: OwnerLease;
  try {
    lease = await coordination.acquire(serveConfig(requested), bound, (workspace) => workspace.writeHostConfig(POLICY_BYTES));
  } catch (error) {
    server.close();
    throw error;
  }
  const { epoch, capability } = lease.localAccess();
  return new Promise<number>((resolve) => {
    let ending = false;
    const closeListener = () =>
      new Promise<void>((closed) => {
        server.close(() => closed());
        server.closeIdleConnections();
      });
    const stopWatching = lease.watch(watchMs, (error) => {
      if (ending) return;
      ending = true;
      // Our files changed under us: stop serving, and touch nothing.
      server.closeAllConnections();
      void closeListener().then(() => {
        const message = ContractError.is(error) ? `${error.code}: ${error.message}` : 'the lease could not be asserted';
        output.record({ event: 'lost', epoch, error: ContractError.is(error) ? error.code : 'unknown' });
        output.warn(`leasehold: lost the workspace (${message}); stopped serving without touching its files`);
        resolve(LEASE_LOST_EXIT);
      });
    });
    const stop = () => {
      if (ending) return;
      ending = true;
      stopWatching();
      void (async () => {
        lease.phase('stopping');
        await closeListener();
        await lease.release();
        output.record({ event: 'stopped', epoch });
        output.say(`stopped   ${root}`);
        resolve(0);
      })().catch((error: unknown) => {
        output.warn(`leasehold: could not stop cleanly: ${ContractError.is(error) ? `${error.code}: ${error.message}` : 'error'}`);
        resolve(1);
      });
    };
    server.on(
      'request',
      transportHandler({
        hostHeader: addressOf(bound).hostHeader,
        capability,
        status: () => ({ epoch, phase: lease.registration.phase, root, pid: process.pid }),
        stop,
      }),
    );
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    output.record({ event: 'ready', endpoint: bound, epoch, pid: process.pid });
    output.say(
      ...table([
        ['serving', root],
        ['endpoint', bound],
        ['epoch', epoch],
        ['pid', String(process.pid)],
      ]),
      '',
      `Stop it with Ctrl-C, or: leasehold stop ${placeOptions(root, stateHome)}`,
    );
  });
}
