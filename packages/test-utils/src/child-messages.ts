import type { SpawnedChild } from './child-process.js';

/** Whether a stdout line is a JSON object with `key`. */
export function isMessage(key: string): (line: string) => boolean {
  return (line) => {
    try {
      const message = JSON.parse(line) as unknown;
      return typeof message === 'object' && message !== null && key in message;
    } catch {
      return false;
    }
  };
}

/** The first JSON message of a child that has `key` (waiting for it). */
export async function messageOf(child: SpawnedChild, key: string): Promise<Record<string, unknown>> {
  return JSON.parse(await child.line(isMessage(key))) as Record<string, unknown>;
}

/** Every JSON message a child printed that has `key`. */
export function messagesOf(child: SpawnedChild, key: string): Record<string, unknown>[] {
  return child.lines.filter(isMessage(key)).map((line) => JSON.parse(line) as Record<string, unknown>);
}

/**
 * Serves a line of waiter fixtures in turn, first to last: each must print `{"acquired"}` while none
 * behind it has, is then sent `release`, and must print `{"released"}` and exit 0.
 * @throws Error naming the waiter that broke the turn, with what every waiter printed.
 */
export async function serveInTurn(waiters: readonly SpawnedChild[]): Promise<void> {
  const said = () => waiters.map((child) => child.lines.join(' | ')).join(' || ');
  for (const [index, current] of waiters.entries()) {
    await messageOf(current, 'acquired').catch(() => {
      throw new Error(`waiter ${index} did not acquire: ${said()}`);
    });
    // One at a time: nobody behind it has acquired.
    const early = waiters.slice(index + 1).findIndex((later) => messagesOf(later, 'acquired').length > 0);
    if (early !== -1) throw new Error(`waiter ${index + 1 + early} acquired while waiter ${index} held: ${said()}`);
    current.send('release');
    await messageOf(current, 'released');
    const end = await current.closed;
    if (end.code !== 0 || end.signal !== null)
      throw new Error(`waiter ${index} ended with code ${end.code}, signal ${end.signal}: ${said()}`);
  }
}

/** What an on-demand client fixture prints once connected: `{"connected":{"epoch","pid","compatibility"?}}`. */
export interface ConnectedClient {
  readonly epoch: string;
  readonly pid: number;
  readonly compatibility?: string;
}

/**
 * Waits until every client has ended, and answers each one's connection and every output (its
 * stdout lines and stderr, for a secrets scan). Throws, with their output, when any did not exit 0.
 */
export async function connectedClients(
  clients: readonly SpawnedChild[],
): Promise<{ connected: ConnectedClient[]; outputs: string[] }> {
  const ends = await Promise.all(clients.map((client) => client.closed));
  const outputs = clients.flatMap((client, index) => [client.lines.join('\n'), ends[index]!.stderr]);
  const failed = clients.flatMap((client, index) =>
    ends[index]!.code === 0
      ? []
      : [
          `pid ${client.pid}, exit ${ends[index]!.code ?? ends[index]!.signal}: ${outputs[2 * index]}${outputs[2 * index + 1]}`,
        ],
  );
  if (failed.length > 0) throw new Error(`clients that did not connect:\n${failed.join('\n')}`);
  return {
    connected: clients.map((client) => messagesOf(client, 'connected')[0]!.connected as ConnectedClient),
    outputs,
  };
}
