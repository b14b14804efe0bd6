import { encode } from '@leasehold/contracts';

/**
 * The service policy of `leasehold serve`, published as host-config.json: the
 * transport and routes it serves. Its SHA-256 is the config's
 * policyIdentity, so a workspace served by another kind of service is not
 * taken over by this one (`conflict`).
 */
export const POLICY_BYTES = encode({
  schema: 'leasehold.cli-policy/1',
  transport: 'http',
  routes: ['GET /v1/status', 'POST /v1/stop'],
  authorization: 'bearer-capability',
});
