import { randomUUID } from 'node:crypto';
import type { EtcdCluster } from '@leasehold/test-utils';
import { expect } from 'vitest';
import { cleanEnv, cli, json, sandbox, type Result, type Sandbox } from './helpers.js';

/** Two state homes on one machine stand for two hosts: each has its own files and its own `LEASEHOLD_HOST`. */
export interface Host {
  readonly box: Sandbox;
  readonly env: NodeJS.ProcessEnv;
  /** `leasehold ARGS --json` on this host, with `--workspace W --state-home S` (or `--state-home S` without a workspace). */
  run(args: readonly string[], workspace?: string): Promise<Result>;
}

/** A host named `name`, with a sandbox of its own (removed by `removeSandboxes`). */
export function hostNamed(name: string): Host {
  const box = sandbox();
  const env = cleanEnv({ LEASEHOLD_HOST: name });
  return {
    box,
    env,
    run: (args, workspace) =>
      cli([...args, ...(workspace === undefined ? ['--state-home', box.stateHome] : box.place(workspace)), '--json'], {
        env,
      }),
  };
}

/** A host whose state home is on a fresh prefix of `cluster` (given with it), recorded by `leasehold init`. */
export async function etcdHostOn(cluster: EtcdCluster, name: string): Promise<Host & { readonly prefix: string }> {
  const host = hostNamed(name);
  const prefix = `/leasehold/cli-${randomUUID()}`;
  const init = await host.run(['init', '--etcd-endpoints', cluster.endpoints.join(','), '--etcd-prefix', prefix]);
  expect(init.code).toBe(0);
  return { ...host, prefix };
}

/** Asks `status` again until it answers `wanted` (each answer is a real CLI run; bounded by the CLI helper's wait). */
export async function statusUntil(host: Host, workspace: string, wanted: string): Promise<Record<string, unknown>> {
  for (let attempt = 0; ; attempt += 1) {
    const report = json(await host.run(['status'], workspace));
    if (report.status === wanted || attempt === 200) return report;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
