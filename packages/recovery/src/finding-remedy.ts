/**
 * A process this host cannot tell live or gone (another host, another PID namespace): a person
 * must make sure it is gone before applying the remedy, then apply it from `runFrom`.
 */
export interface ProcessGone {
  readonly pid: number;
  readonly host: string;
  /**
   * Where the remedy then runs: `here`, as any other remedy (it acts on a file of the state home);
   * `its-pid-namespace`, on this host but inside the PID namespace (the container) the process ran
   * in, the one place that can tell it gone; `its-host`, on `host`, for the same reason.
   */
  readonly runFrom: 'here' | 'its-pid-namespace' | 'its-host';
}

/**
 * What clears a finding, as data: the kind of remedy and the facts it acts on. Leasehold never
 * applies one; a tool words it (the `leasehold` command prints each as a command line).
 */
export type FindingRemedy =
  /** Remove the file (`recursive`: or the folder, with what it holds), after `processGone` when given. */
  | { readonly kind: 'remove'; readonly path: string; readonly recursive: boolean; readonly processGone?: ProcessGone }
  /** Set the permission bits of `path` to `mode` (0o700 for a folder, 0o600 for a file). */
  | { readonly kind: 'chmod'; readonly path: string; readonly mode: number }
  /** Give `path` to `uid` (this user); `asRoot`: only root may, and this user is not root. */
  | { readonly kind: 'chown'; readonly path: string; readonly uid: number; readonly asRoot: boolean }
  /** The state home itself is the user `uid`'s: run as that user, or use a state home of one's own (never take it over). */
  | { readonly kind: 'own-state-home'; readonly uid: number }
  /** Repair or restore `path` by hand (Leasehold never rewrites a file it cannot read), then diagnose `stateHome` again. */
  | { readonly kind: 'repair'; readonly path: string; readonly stateHome: string }
  /** A writer is at work on the file: wait for it, then diagnose `stateHome` again. */
  | { readonly kind: 'wait-for-writer'; readonly stateHome: string }
  /** Review and recover the workspace (`fileRecovery`'s `view`, then `recover`), after `processGone` when given. */
  | {
      readonly kind: 'recover';
      readonly workspace: string;
      readonly stateHome: string;
      readonly processGone?: ProcessGone;
    }
  /**
   * Keep the state home on a local disk, or, where every host that reaches it sees a rename at once,
   * verify its file system and allow it by the name `allowAs` (`leasehold init --allow-fs`).
   */
  | { readonly kind: 'file-system'; readonly stateHome: string; readonly allowAs: string }
  /** Stop the workspace's live owner, or end the program its gone owner fenced it with (`leasehold stop` does either). */
  | { readonly kind: 'stop'; readonly workspace: string; readonly stateHome: string };
