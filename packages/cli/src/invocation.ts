import { readFileSync } from 'node:fs';
import type { Streams } from './output.js';

// A remedy is printed as the person can run it (SPEC 8): as the command was invoked. Every
// remedy and next step is written `leasehold …`; run through npx or a package manager, where
// `leasehold` is not on the PATH, each is printed with the words that run it there instead, as
// package managers' own commands print theirs.

/** The package manager that ran the command, from its user agent (`pnpm/10.34.9 npm/? node/…`). */
function agentOf(env: NodeJS.ProcessEnv): string | undefined {
  return env.npm_config_user_agent?.split('/')[0];
}

/** How to run the package script `script` with arguments under `agent`. */
function scriptRun(agent: string | undefined, script: string): string | undefined {
  if (agent === 'pnpm' || agent === 'yarn') return `${agent} ${script}`;
  if (agent === 'npm') return `npm run ${script} --`;
  return undefined;
}

/** Whether the package.json a package manager names (`npm_package_json`) has a script `name`. */
function hasScript(env: NodeJS.ProcessEnv, name: string): boolean {
  if (env.npm_package_json === undefined) return false;
  try {
    const manifest = JSON.parse(readFileSync(env.npm_package_json, 'utf8')) as { scripts?: Record<string, unknown> };
    return typeof manifest.scripts?.[name] === 'string';
  } catch {
    return false;
  }
}

/**
 * The words that run the command as it was invoked, when that is not a plain `leasehold` on the
 * PATH: `npx leasehold` (npm exec), `pnpm exec leasehold`, `pnpm leasehold` (pnpm runs a bin, or
 * a package script named `leasehold`), `npm run leasehold --`, `yarn leasehold`. Undefined for a
 * plain `leasehold`, and when a script of another name ran it and the project has no `leasehold`
 * script (nothing better to print).
 */
export function invocationOf(env: NodeJS.ProcessEnv): string | undefined {
  const agent = agentOf(env);
  if (env.npm_command === 'exec')
    return agent === 'npm' ? 'npx leasehold' : agent === undefined ? undefined : `${agent} exec leasehold`;
  const script = env.npm_lifecycle_event;
  if (script === undefined) return agent === 'pnpm' && env.npm_command === 'run-script' ? 'pnpm leasehold' : undefined;
  if (script === 'leasehold' || hasScript(env, 'leasehold')) return scriptRun(agent, 'leasehold');
  return undefined;
}

/** A `leasehold` command word in text: after a start, a space, a quote, a backtick or a colon, before a command's name. */
const COMMAND_WORD = /(^|[\s`'"(:])leasehold (?=(?:init|serve|run|status|stop|list|recover|journal|doctor|help)\b)/gm;

/** `stream`, each string written through it with every `leasehold COMMAND` said as `invocation COMMAND`. */
function rewriting<T extends { write(chunk: string): unknown }>(stream: T, invocation: string): T {
  return new Proxy(stream, {
    get(target, key, receiver) {
      if (key === 'write')
        return (chunk: unknown, ...rest: unknown[]) =>
          (target.write as (...args: unknown[]) => unknown)(
            typeof chunk === 'string' ? chunk.replace(COMMAND_WORD, `$1${invocation} `) : chunk,
            ...rest,
          );
      const value: unknown = Reflect.get(target, key, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * `io` whose standard output and error print every suggested command as the command was invoked
 * (`invocationOf`); `io` itself for a plain `leasehold`. The streams are still made on first touch.
 */
export function asInvoked<T extends Streams & { readonly env: NodeJS.ProcessEnv }>(io: T): T {
  const invocation = invocationOf(io.env);
  if (invocation === undefined) return io;
  let stdout: T['stdout'] | undefined;
  let stderr: T['stderr'] | undefined;
  return new Proxy(io, {
    get(target, key, receiver) {
      if (key === 'stdout') return (stdout ??= rewriting(target.stdout, invocation));
      if (key === 'stderr') return (stderr ??= rewriting(target.stderr, invocation));
      return Reflect.get(target, key, receiver);
    },
  });
}
