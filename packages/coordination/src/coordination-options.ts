import type { Backend } from '@leasehold/contracts';
import type { PrivateFilesHooks } from '@leasehold/private-files';
import type { RegistryOptions } from '@leasehold/registry';

export interface CoordinationOptions {
  /** Defaults to `defaultStateHome()`. */
  readonly stateHome?: string;
  /** Handed to every PrivateFiles used (tests only). */
  readonly hooks?: PrivateFilesHooks;
  /** Bound of the registry lock wait, in milliseconds (default 2000). */
  readonly lockWaitMs?: number;
  /**
   * The backend this state home is used with (default the file backend), handed to its Registry:
   * a new state home records it, and one that records another refuses every transaction.
   */
  readonly backend?: Backend;
}

/** What the Registry of a workspace takes from its coordination's options. */
export function registryOptionsOf(options: CoordinationOptions): RegistryOptions {
  return {
    ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
    ...(options.lockWaitMs === undefined ? {} : { lockWaitMs: options.lockWaitMs }),
    ...(options.backend === undefined ? {} : { backend: options.backend }),
  };
}
