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
