/** A concrete bound endpoint on 127.0.0.1; nothing listens on it, it only has to be distinct per owner. */
export function loopbackEndpoint(port: number): string {
  return `http://127.0.0.1:${port}`;
}
