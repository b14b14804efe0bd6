// The secrets check's haystack: what every process printed and every state home held, and the
// capabilities that must appear in none of it.

/**
 * Every stdout and stderr of every process this test file ran, and every file
 * a state home held when its sandbox was removed (the journal among them,
 * `local-capability.json` excepted): the haystack of the secrets check.
 */
export const transcript: string[] = [];
/** Every capability read from a capability file while its server ran. */
export const capabilitiesSeen = new Set<string>();

/** The forms a capability's 32 bytes could leak in. */
function leakForms(capability: string): string[] {
  const bytes = Buffer.from(capability, 'base64url');
  return [
    capability,
    bytes.toString('base64').replace(/=+$/, ''),
    bytes.toString('hex'),
    bytes.toString('hex').toUpperCase(),
  ];
}

/** Which capabilities (by index, never by value) appear in which transcript entries. */
export function capabilityLeaks(): string[] {
  const found: string[] = [];
  [...capabilitiesSeen].forEach((capability, index) => {
    const forms = leakForms(capability);
    transcript.forEach((text, entry) => {
      if (forms.some((form) => text.includes(form))) found.push(`capability #${index} in transcript entry #${entry}`);
    });
  });
  return found;
}
