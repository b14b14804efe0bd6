import { ContractError, anyPortEndpoint } from '@leasehold/contracts';

/** A loopback endpoint as a socket address, with the one `Host` header it may be reached by. */
export interface LoopbackAddress {
  readonly hostname: string;
  readonly port: number;
  readonly hostHeader: string;
}

/**
 * `http://127.0.0.1:PORT` or `http://[::1]:PORT` (PORT may be 0 for "any
 * free port") as a socket address.
 * @throws ContractError `refused` for anything else.
 */
export function addressOf(endpoint: string): LoopbackAddress {
  if (!anyPortEndpoint.safeParse(endpoint).success) {
    throw new ContractError('refused', 'endpoint: not http://127.0.0.1:PORT or http://[::1]:PORT');
  }
  const url = new URL(endpoint);
  const port = Number(url.port === '' ? 80 : url.port);
  return { hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'), port, hostHeader: `${url.hostname}:${port}` };
}

/** The endpoint of a listener bound to `hostname` and `port`. */
export function endpointOf(hostname: string, port: number): string {
  return `http://${hostname === '::1' ? '[::1]' : hostname}:${port}`;
}
