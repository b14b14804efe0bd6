import { readFileSync, renameSync } from 'node:fs';
import { fileOperation } from '@leasehold/private-files';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, codeOf } from '@leasehold/test-utils';
import { initialised, writePrivateFile } from '../test/helpers.js';

afterEach(cleanUp);

// Within one operation the registry reads format.json in full once, then proves it by its stamp:
// any publication makes a new file, so a replaced one is read in full again, in the same
// operation and in the next.

describe('format.json within one operation', () => {
  it('a format.json replaced inside an operation is read again in full: a malformed one is refused', async () => {
    const { registry } = await initialised();
    fileOperation(() => {
      expect(registry.list().entries).toEqual([]);
      const aside = `${registry.layout.stateHome}.format-aside`;
      renameSync(registry.layout.registryFormat, aside);
      writePrivateFile(registry.layout.registryFormat, '{"schema":"leasehold.registry-format/1"}');
      // Refused for the document, not for a stray name: the old file is outside the registry folder.
      expect(() => registry.list()).toThrow(/format\.json/);
      renameSync(aside, registry.layout.registryFormat);
      expect(registry.list().entries).toEqual([]);
    });
  });

  it('a format.json rewritten with the same bytes inside an operation is read again, and still valid', async () => {
    const { registry } = await initialised();
    fileOperation(() => {
      const before = registry.list().format;
      const bytes = readFileSync(registry.layout.registryFormat);
      renameSync(registry.layout.registryFormat, `${registry.layout.stateHome}.format-old`);
      writePrivateFile(registry.layout.registryFormat, bytes);
      const after = registry.list().format;
      expect(after?.identity).toBe(before?.identity);
      expect(after?.stamp).not.toBe(before?.stamp);
    });
  });

  it('a format.json made malformed between two operations is refused by the next', async () => {
    const { registry } = await initialised();
    fileOperation(() => registry.list());
    renameSync(registry.layout.registryFormat, `${registry.layout.stateHome}.format-old`);
    writePrivateFile(registry.layout.registryFormat, '{}');
    expect(codeOf(() => fileOperation(() => registry.list()))).toBe('refused');
    expect(() => registry.list()).toThrow(/format\.json/);
  });
});
