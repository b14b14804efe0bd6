import { encode, sha256, type OwnerConfig } from '@leasehold/contracts';

/**
 * The service policy of `leasehold serve`, published as host-config.json: the
 * transport and routes it serves. Its identity is the config's
 * policyIdentity, so a workspace served by another kind of service is not
 * taken over by this one (`conflict`).
 */
export const POLICY_BYTES = encode({
  schema: 'leasehold.cli-policy/1',
  transport: 'http',
  routes: ['GET /v1/status', 'POST /v1/stop'],
  authorization: 'bearer-capability',
});

/** The owner config of `leasehold serve` for the requested endpoint. */
export function serveConfig(endpoint: string): OwnerConfig {
  return { schema: 'leasehold.owner-config/1', endpoint, policyIdentity: sha256(POLICY_BYTES) };
}
