import type { Inspection, ListedOwner, Ownership } from '@leasehold/contracts';
import { rootsOverlap } from '@leasehold/state-home';

/** The workspace a command run at a folder is about, found as git finds its root from a subfolder. */
export interface Covering {
  /** The root the answer is about: the folder itself, or the fenced workspace the folder is inside. */
  readonly root: string;
  /** The fenced workspaces inside the folder, when it is above them: a serve of the folder would overlap them. */
  readonly inside: readonly ListedOwner[];
}

/** Whether an inspection leaves room for an overlapping fence: nothing of the folder itself is fenced. */
export function unfenced(inspection: Inspection): boolean {
  return inspection.status === 'absent' || inspection.status === 'stopped';
}

/**
 * The folder itself when `inspection` (the folder's own) shows it fenced. Otherwise the fenced
 * workspace around it, if any (the answer is then about that one), else the folder with those
 * inside it. Fenced roots never overlap one another, so there is at most one around it, and none
 * around it when one is inside it.
 */
export async function coveringOf(ownership: Ownership, folder: string, inspection: Inspection): Promise<Covering> {
  if (!unfenced(inspection)) return { root: folder, inside: [] };
  const overlapping = (await ownership.list()).filter(
    (entry) => entry.root !== folder && rootsOverlap(entry.root, folder),
  );
  // Overlapping and shorter: an ancestor folder of this one.
  const around = overlapping.find((entry) => entry.root.length < folder.length);
  return around === undefined ? { root: folder, inside: overlapping } : { root: around.root, inside: [] };
}
