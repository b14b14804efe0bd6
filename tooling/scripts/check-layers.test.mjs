import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { checkLayers, findImportSpecifiers } from './check-layers.mjs';

const scriptFile = fileURLToPath(new URL('./check-layers.mjs', import.meta.url));
const realRepoRoot = resolve(dirname(scriptFile), '..', '..');
const order = 'contracts <- private-files <- registry <- coordination <- recovery <- cli';

const tempRoots = [];
afterEach(() => {
  for (const root of tempRoots.splice(0)) rmSync(root, { recursive: true, force: true });
});

function writeFile(path, text) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
}

function publicManifest(folder) {
  return {
    name: `@leasehold/${folder}`,
    version: '0.0.0',
    type: 'module',
    exports: { '.': { types: './dist/index.d.ts', import: './dist/index.js' }, './package.json': './package.json' },
  };
}

/**
 * A fake monorepo in a temp folder. Each package gets a manifest (its fields
 * override a valid public one; `undefined` removes a field), a README unless
 * `readme: false`, and the given files.
 */
function makeRepository(packages) {
  const root = mkdtempSync(join(tmpdir(), 'check-layers-'));
  tempRoots.push(root);
  writeFile(join(root, 'tooling', 'vitest.shared.js'), 'export default {};\n');
  for (const [folder, { manifest = {}, files = {}, readme = true }] of Object.entries(packages)) {
    const dir = join(root, 'packages', folder);
    writeFile(join(dir, 'package.json'), JSON.stringify({ ...publicManifest(folder), ...manifest }, null, 2));
    if (readme) writeFile(join(dir, 'README.md'), `# @leasehold/${folder}\n`);
    for (const [path, text] of Object.entries({ 'src/index.ts': 'export {};\n', ...files })) {
      writeFile(join(dir, path), text);
    }
  }
  return root;
}

/** Three layers and a private test helper, all following the rules. */
function cleanPackages() {
  return {
    contracts: {
      files: {
        'src/index.ts': "export { encode } from './codec.js';\n",
        'src/codec.ts': 'export const encode = (value: unknown) => JSON.stringify(value);\n',
        'vitest.config.ts': "export { default } from '../../tooling/vitest.shared.js';\n",
      },
    },
    'private-files': {
      manifest: {
        dependencies: { '@leasehold/contracts': 'workspace:^', zod: '^4.1.0' },
        devDependencies: { '@leasehold/test-utils': 'workspace:*' },
      },
      files: {
        'src/index.ts': [
          "import { encode } from '@leasehold/contracts';",
          "import type { Registration } from '@leasehold/contracts';",
          "// import { parse } from '@leasehold/contracts/src/json-parser.js';",
          "const example = \"import x from '@leasehold/contracts/src/codec.js'\";",
          'export { encode, example };',
          'export type { Registration };',
          '',
        ].join('\n'),
        'test/files.test.ts': "import { temporaryRoot } from '@leasehold/test-utils';\nimport { encode } from '../src/index.js';\n",
      },
    },
    registry: {
      manifest: { dependencies: { '@leasehold/contracts': 'workspace:^', '@leasehold/private-files': 'workspace:^' } },
      files: { 'src/index.ts': "export * from '@leasehold/private-files';\nexport const load = () => import('@leasehold/contracts');\n" },
    },
    'test-utils': {
      manifest: { private: true, dependencies: { '@leasehold/contracts': 'workspace:^', '@leasehold/registry': 'workspace:^' } },
      files: { 'src/index.ts': "export { load } from '@leasehold/registry';\nexport const temporaryRoot = () => '/tmp';\n" },
    },
  };
}

describe('checkLayers on a fake repository', () => {
  it('passes a clean repository with zero violations', () => {
    const root = makeRepository(cleanPackages());

    expect(checkLayers(root)).toEqual({ violations: [], packages: 4, files: 7 });
  });

  it('refuses a layer that depends on a layer above it', () => {
    const packages = cleanPackages();
    packages.contracts.manifest = { dependencies: { '@leasehold/registry': 'workspace:^' } };

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      `@leasehold/contracts packages/contracts/package.json: depends on @leasehold/registry (dependencies), which is not below it in the layer order ${order}`,
    ]);
  });

  it('refuses a layer that depends on itself or on a layer that is not below it, even as a devDependency', () => {
    const packages = cleanPackages();
    packages.coordination = {};
    packages.registry.manifest.dependencies['@leasehold/registry'] = 'workspace:^';
    packages['private-files'].manifest.devDependencies['@leasehold/coordination'] = 'workspace:*';

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toContain('@leasehold/registry packages/registry/package.json: depends on itself (dependencies)');
    expect(violations).toContain(
      `@leasehold/private-files packages/private-files/package.json: depends on @leasehold/coordination (devDependencies), which is not below it in the layer order ${order}`,
    );
    expect(violations).toHaveLength(2);
  });

  it('refuses internal ranges other than workspace:^ at runtime and workspace:* for development', () => {
    const packages = cleanPackages();
    packages['private-files'].manifest.dependencies['@leasehold/contracts'] = '^0.1.0';
    packages.registry.manifest.dependencies['@leasehold/contracts'] = 'workspace:*';
    packages.registry.manifest.devDependencies = { '@leasehold/test-utils': 'workspace:^' };
    packages.registry.manifest.peerDependencies = { '@leasehold/private-files': 'workspace:~' };
    packages['test-utils'].manifest.optionalDependencies = { '@leasehold/private-files': 'file:../private-files' };

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/private-files packages/private-files/package.json: dependencies["@leasehold/contracts"] is "^0.1.0"; a runtime internal dependency must be "workspace:^"',
      '@leasehold/registry packages/registry/package.json: dependencies["@leasehold/contracts"] is "workspace:*"; a runtime internal dependency must be "workspace:^"',
      '@leasehold/registry packages/registry/package.json: peerDependencies["@leasehold/private-files"] is "workspace:~"; a runtime internal dependency must be "workspace:^"',
      '@leasehold/registry packages/registry/package.json: devDependencies["@leasehold/test-utils"] is "workspace:^"; a dev-only internal dependency must be "workspace:*"',
      '@leasehold/test-utils packages/test-utils/package.json: optionalDependencies["@leasehold/private-files"] is "file:../private-files"; a runtime internal dependency must be "workspace:^"',
    ]);
  });

  it('refuses deep imports: package subpaths, static, re-exported, dynamic or required, and relative escapes', () => {
    const packages = cleanPackages();
    packages.registry.files['src/deep.ts'] = [
      "import { encode } from '@leasehold/contracts/dist/codec.js';",
      "export { parse } from '@leasehold/contracts/src/x';",
      "import { decode } from '../../contracts/src/codec.js';",
      'export async function later() {',
      "  return import('@leasehold/private-files/dist/private-files.js');",
      '}',
      "const pkg = require('../../../package.json');",
      '',
    ].join('\n');
    packages['private-files'].files['test/escape.test.ts'] = "import { encode } from '../../contracts/src/codec.js';\n";

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/private-files packages/private-files/test/escape.test.ts:1: import "../../contracts/src/codec.js" reaches into another package (packages/contracts); import its public entry point instead',
      '@leasehold/registry packages/registry/src/deep.ts:1: deep import "@leasehold/contracts/dist/codec.js"; import the public entry point "@leasehold/contracts"',
      '@leasehold/registry packages/registry/src/deep.ts:2: deep import "@leasehold/contracts/src/x"; import the public entry point "@leasehold/contracts"',
      '@leasehold/registry packages/registry/src/deep.ts:3: import "../../contracts/src/codec.js" reaches into another package (packages/contracts); import its public entry point instead',
      '@leasehold/registry packages/registry/src/deep.ts:5: deep import "@leasehold/private-files/dist/private-files.js"; import the public entry point "@leasehold/private-files"',
      '@leasehold/registry packages/registry/src/deep.ts:7: import "../../../package.json" escapes the package folder',
    ]);
  });

  it('refuses a deep target in the package.json "imports" field', () => {
    const packages = cleanPackages();
    packages.registry.manifest.imports = { '#codec': { default: '@leasehold/contracts/dist/codec.js' } };

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/registry packages/registry/package.json: "imports" deep import "@leasehold/contracts/dist/codec.js"; import the public entry point "@leasehold/contracts"',
    ]);
  });

  it('allows @leasehold/<name>/package.json and relative imports into tooling/', () => {
    const packages = cleanPackages();
    packages.registry.files['src/version.ts'] = [
      "import contractsManifest from '@leasehold/contracts/package.json' with { type: 'json' };",
      "import shared from '../../../tooling/vitest.shared.js';",
      'export const version = contractsManifest.version;',
      'export { shared };',
      '',
    ].join('\n');

    expect(checkLayers(makeRepository(packages)).violations).toEqual([]);
  });

  it('refuses an undeclared internal import, and a layer above even when undeclared', () => {
    const packages = cleanPackages();
    delete packages.registry.manifest.dependencies['@leasehold/contracts'];
    packages.contracts.files['src/owner.ts'] = "import type { Registry } from '@leasehold/registry';\n";

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/contracts packages/contracts/src/owner.ts:1: imports "@leasehold/registry", which is not declared in its package.json',
      `@leasehold/contracts packages/contracts/src/owner.ts:1: imports "@leasehold/registry", which is not below it in the layer order ${order}`,
      '@leasehold/registry packages/registry/src/index.ts:2: imports "@leasehold/contracts", which is not declared in its package.json',
    ]);
  });

  it('refuses a private helper package as a runtime dependency of a layered package', () => {
    const packages = cleanPackages();
    delete packages['private-files'].manifest.devDependencies;
    packages['private-files'].manifest.dependencies['@leasehold/test-utils'] = 'workspace:^';
    packages.registry.manifest.peerDependencies = { '@leasehold/test-utils': 'workspace:^' };

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/private-files packages/private-files/package.json: depends at runtime on @leasehold/test-utils (dependencies), which is not in the layer order; a layered package may use a helper package only as a devDependency',
      '@leasehold/registry packages/registry/package.json: depends at runtime on @leasehold/test-utils (peerDependencies), which is not in the layer order; a layered package may use a helper package only as a devDependency',
    ]);
  });

  it('refuses a published package outside the order, a missing README or exports map, and a dependency outside the workspace', () => {
    const packages = cleanPackages();
    packages.metrics = { readme: false, manifest: { exports: undefined } };
    packages.contracts.manifest = { exports: { './codec': './dist/codec.js' } };
    packages.registry.manifest.dependencies['@leasehold/coordination'] = 'workspace:^';

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/contracts packages/contracts/package.json: its "exports" map has no "." entry',
      `@leasehold/metrics packages/metrics/package.json: is published but not in the layer order ${order}: place it in the order or make it "private": true`,
      '@leasehold/metrics packages/metrics/package.json: has no README.md',
      '@leasehold/metrics packages/metrics/package.json: has no "exports" map',
      '@leasehold/registry packages/registry/package.json: depends on @leasehold/coordination (dependencies), which is not a package in this workspace',
      `@leasehold/registry packages/registry/package.json: depends on @leasehold/coordination (dependencies), which is not below it in the layer order ${order}`,
    ]);
  });

  it('refuses a symbolic link to a source file or folder, which the check cannot follow', () => {
    const root = makeRepository(cleanPackages());
    symlinkSync(join(root, 'packages', 'contracts', 'src', 'codec.ts'), join(root, 'packages', 'registry', 'src', 'codec.ts'));

    const { violations } = checkLayers(root);

    expect(violations).toEqual([
      '@leasehold/registry packages/registry/src/codec.ts: is a symbolic link; the layer check does not follow links, so it cannot see what this one reaches',
    ]);
  });

  it('skips a folder under packages/ that has no package.json yet', () => {
    const root = makeRepository(cleanPackages());
    writeFile(join(root, 'packages', 'coordination', 'src', 'index.ts'), "import '@leasehold/recovery/src/x.js';\n");

    expect(checkLayers(root)).toEqual({ violations: [], packages: 4, files: 7 });
  });

  it('refuses a package whose name does not match its folder', () => {
    const packages = cleanPackages();
    packages.registry.manifest.name = '@leasehold/coordination';

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toContain(
      '@leasehold/coordination packages/registry/package.json: folder packages/registry must hold the package "@leasehold/registry", not "@leasehold/coordination"',
    );
  });
});

describe('findImportSpecifiers', () => {
  it('finds every form of import and nothing in comments, strings, regular expressions or templates', () => {
    const source = [
      "import a from 'static';",
      "import type { B } from \"type-only\";",
      "import 'side-effect';",
      "export * from 're-export';",
      "export type { C } from 'type-re-export';",
      'const d = await import(',
      "  'dynamic'",
      ');',
      "const e = require('required');",
      "type F = typeof import('type-query');",
      'const g = import(`template-no-substitution`);',
      "// import x from 'line-comment';",
      "/* export * from 'block-comment'; */",
      "const quote = /['\"]/g; const text = \"import y from 'in-a-string'\";",
      "const template = `${a ? `import z from 'nested'` : ''} from 'in-template'`;",
      "const h = Array.from('not-a-module');",
      "vi.mock('mocked');",
      '',
    ].join('\n');

    expect(findImportSpecifiers(source)).toEqual([
      { specifier: 'static', line: 1 },
      { specifier: 'type-only', line: 2 },
      { specifier: 'side-effect', line: 3 },
      { specifier: 're-export', line: 4 },
      { specifier: 'type-re-export', line: 5 },
      { specifier: 'dynamic', line: 7 },
      { specifier: 'required', line: 9 },
      { specifier: 'type-query', line: 10 },
      { specifier: 'template-no-substitution', line: 11 },
      { specifier: 'mocked', line: 17 },
    ]);
  });
});

describe('the check-layers command', () => {
  function run(repoRoot) {
    return spawnSync(process.execPath, [scriptFile, repoRoot], { encoding: 'utf8' });
  }

  it('prints one OK line and exits 0 on a clean repository', () => {
    const result = run(makeRepository(cleanPackages()));

    expect(result.status).toBe(0);
    expect(result.stdout).toBe(`check-layers: OK, 4 packages, 7 source files (${order})\n`);
  });

  it('prints one line per violation and exits 1', () => {
    const packages = cleanPackages();
    packages.contracts.manifest = { dependencies: { '@leasehold/registry': 'workspace:^' } };
    packages.registry.files['src/deep.ts'] = "import { encode } from '@leasehold/contracts/dist/codec.js';\n";

    const result = run(makeRepository(packages));

    expect(result.status).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      `@leasehold/contracts packages/contracts/package.json: depends on @leasehold/registry (dependencies), which is not below it in the layer order ${order}`,
      '@leasehold/registry packages/registry/src/deep.ts:1: deep import "@leasehold/contracts/dist/codec.js"; import the public entry point "@leasehold/contracts"',
      'check-layers: 2 violations in 4 packages, 8 source files',
    ]);
  });
});

describe('the real repository', () => {
  it('has no layer violations', () => {
    const result = checkLayers(realRepoRoot);

    expect(result.violations).toEqual([]);
    expect(result.packages).toBeGreaterThan(0);
  });
});
