import { writeFileSync } from 'node:fs';

/**
 * Whether this process is the first to create `path` (exclusively, writing its pid): of racing
 * fixtures, exactly one answers true, so that a test can make that one block or crash.
 */
export function firstToCreate(path: string): boolean {
  try {
    writeFileSync(path, String(process.pid), { flag: 'wx' });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
}
