import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanUp, makeTemporaryFolder } from '@leasehold/test-utils';
import { rootExists } from './index.js';

afterEach(cleanUp);

describe('rootExists', () => {
  it('is true only for a folder under its own real name: not a file, a link to a folder, or nothing', () => {
    const parent = makeTemporaryFolder('leasehold-root-exists-');
    const folder = join(parent, 'ws');
    mkdirSync(folder);
    writeFileSync(join(parent, 'file'), 'x');
    symlinkSync(folder, join(parent, 'link'));
    expect(
      Object.fromEntries(
        ['ws', 'file', 'link', 'missing', 'ws/../ws'].map((name) => [name, rootExists(`${parent}/${name}`)]),
      ),
    ).toEqual({ ws: true, file: false, link: false, missing: false, 'ws/../ws': false });
  });
});
