import {
  ContractError,
  fileSystemInWords,
  fileSystemRemedy,
  magicInHex,
  type FileSystemAllowance,
} from '@leasehold/contracts';
import { fileSystemOf, type FileSystem } from '@leasehold/private-files';

/**
 * How an allowance names a file system: its name, or, for one the table does not know, its
 * `statfs` magic number in hex (`0x858458f6`).
 */
function allowanceName(fileSystem: FileSystem): string {
  return fileSystem.name === 'unknown' ? magicInHex(fileSystem.magic) : fileSystem.name;
}

/** The allowance that names `fileSystem`. */
export function allowanceOf(fileSystem: FileSystem): FileSystemAllowance {
  return { name: allowanceName(fileSystem), magic: fileSystem.magic };
}

/** Whether two allowances name the same file system (its name and its magic). */
export function sameAllowance(a: FileSystemAllowance | undefined, b: FileSystemAllowance): boolean {
  return a?.name === b.name && a.magic === b.magic;
}

/** The file system a path is on, and whether it is usable there: proven, or not proven but allowed. */
export interface FileSystemJudgement {
  readonly fileSystem: FileSystem;
  /** Not proven, and an allowance names it: Leasehold serves there, as its user chose. */
  readonly allowed: boolean;
}

/**
 * The file system `path` is on and whether one of `allowances` names it. `allowances` is only asked
 * for on a file system not proven: a proven one costs one `statfs`.
 */
export function judgeFileSystem(
  path: string,
  allowances: () => readonly (FileSystemAllowance | undefined)[],
): FileSystemJudgement {
  const fileSystem = fileSystemOf(path);
  if (fileSystem.proven) return { fileSystem, allowed: false };
  const named = allowanceOf(fileSystem);
  return { fileSystem, allowed: allowances().some((allowed) => sameAllowance(allowed, named)) };
}

/**
 * Refuses `path`, the state home `stateHome` or a workspace of it, on a file system whose
 * guarantees are not proven, unless one of `allowances` names it (its name and magic). Answers the
 * file system.
 * @throws ContractError `refused` naming the path, the file system and its magic, with the remedy.
 */
export function assertFileSystem(
  path: string,
  stateHome: string,
  what: 'state home' | 'workspace',
  allowances: () => readonly (FileSystemAllowance | undefined)[],
): FileSystem {
  const { fileSystem, allowed } = judgeFileSystem(path, allowances);
  if (fileSystem.proven || allowed) return fileSystem;
  throw new ContractError(
    'refused',
    `${path}: the ${what} is on ${fileSystemInWords(fileSystem)}, a file system ` +
      "on which Leasehold's guarantees are not proven: a rename, link and exclusive create that every process sees at once",
    { path, remedy: fileSystemRemedy(stateHome, allowanceOf(fileSystem).name, what) },
  );
}
