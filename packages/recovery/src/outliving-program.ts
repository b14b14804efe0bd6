import type { Holder, RecoveryFenceView, RecoveryHolderView } from '@leasehold/contracts';
import { sameHolder } from './recovery-state.js';

/** What `outlivingProgram` reads of a recovery view (a `RecoveryView`, or this package's own state): the fences' kinds and holders, and each holder's verdict. */
export interface ViewHolders {
  readonly fences: readonly Pick<RecoveryFenceView, 'kind' | 'holder'>[];
  readonly holders: readonly Pick<RecoveryHolderView, 'holder' | 'verdict' | 'process'>[];
}

/** Whether this host proved the holder's process gone: `absent`, or a lease (etcd) whose process is `absent` here. */
function processGone({ verdict, process }: ViewHolders['holders'][number]): boolean {
  return verdict === 'absent' || process === 'absent';
}

/**
 * The process an owner fenced its workspace with (the companion: `fenceProcess`, such as the
 * program `leasehold run` started), when it outlived that owner: it is `live` on this host while
 * every other process the fences name is proved gone here. Recovery refuses until it ends, and the
 * owner that could end it is gone: only ending that process (its process group) unblocks the
 * workspace. Undefined otherwise (no companion, a gone one, or an owner that may still live).
 */
export function outlivingProgram(view: ViewHolders): Holder | undefined {
  const program = view.fences.find((fence) => fence.kind === 'companion')?.holder;
  if (program === undefined) return undefined;
  const live = view.holders.some((entry) => sameHolder(entry.holder, program) && entry.verdict === 'live');
  const others = view.holders.filter((entry) => !sameHolder(entry.holder, program));
  return live && others.every(processGone) ? program : undefined;
}
