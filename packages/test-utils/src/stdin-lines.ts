import { readSync } from 'node:fs';

/** One line of stdin, read synchronously a byte at a time (nothing is read ahead, no event loop): for a fixture that blocks at a step. */
export function readLineSync(): string {
  const byte = Buffer.alloc(1);
  let line = '';
  for (;;) {
    if (readSync(0, byte, 0, 1, null) === 0) throw new Error('stdin closed');
    if (byte[0] === 0x0a) return line;
    line += String.fromCharCode(byte[0]!);
  }
}
