import { ContractError, fileSystemRemedy, type FileSystemAllowance } from '@leasehold/contracts';
import { fileSystemOf, type FileSystem } from '@leasehold/private-files';

/**
 * How an allowance names a file system: its name, or, for one the table does not know, its
 * `statfs` magic number in hex (`0x858458f6`).
 */
function allowanceName(fileSystem: FileSystem): string {
  return fileSystem.name === 'unknown' ? `0x${fileSystem.magic.toString(16)}` : fileSystem.name;
}

/** The allowance that names `fileSystem`. */
export function allowanceOf(fileSystem: FileSystem): FileSystemAllowance {
  return { name: allowanceName(fileSystem), magic: fileSystem.magic };
}

/** Whether two allowances name the same file system (its name and its magic). */
export function sameAllowance(a: FileSystemAllowance | undefined, b: FileSystemAllowance): boolean {
  return a?.name === b.name && a.magic === b.magic;
}

/**
 * Refuses `path`, the state home `stateHome` or a workspace of it, on a file system whose
 * guarantees are not proven, unless one of `allowances` names it (its name and magic). `allowances`
 * is only asked for on such a file system: a proven one costs one `statfs`. Answers the file system.
 * @throws ContractError `refused` naming the path, the file system and its magic, with the remedy.
 */
export function assertFileSystem(
  path: string,
  stateHome: string,
  what: 'state home' | 'workspace',
  allowances: () => readonly (FileSystemAllowance | undefined)[],
): FileSystem {
  const fileSystem = fileSystemOf(path);
  if (fileSystem.proven) return fileSystem;
  const named = allowanceOf(fileSystem);
  if (allowances().some((allowed) => sameAllowance(allowed, named))) return fileSystem;
  throw new ContractError(
    'refused',
    `${path}: the ${what} is on ${fileSystem.name} (statfs magic 0x${fileSystem.magic.toString(16)}), a file system ` +
      "on which Leasehold's guarantees are not proven: a rename, link and exclusive create that every process sees at once",
    { path, remedy: fileSystemRemedy(stateHome, named.name, what) },
  );
}
