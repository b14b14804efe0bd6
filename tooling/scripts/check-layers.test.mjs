import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  belowTheSeam,
  checkLayers,
  describeLayers,
  helpers,
  layerMapProblems,
  layers,
  seamProblems,
} from './check-layers.mjs';
import { findImportSpecifiers } from './check-layers/import-specifiers.mjs';

const scriptFile = fileURLToPath(new URL('./check-layers.mjs', import.meta.url));
const realRepoRoot = resolve(dirname(scriptFile), '..', '..');
const dag =
  'private-files > contracts; registry > private-files; coordination > registry; recovery > coordination; transport > coordination; etcd > private-files; state-home > recovery, etcd; cli > transport, state-home';

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

function exampleManifest(folder) {
  return { name: `@leasehold/example-${folder}`, version: '0.0.0', private: true, type: 'module' };
}

/**
 * A fake monorepo in a temp folder. Each package (under packages/) or example
 * (under examples/) gets a manifest (its fields override a valid one;
 * `undefined` removes a field), a README unless `readme: false`, and the
 * given files.
 */
function makeRepository(packages, examples = {}) {
  const root = mkdtempSync(join(tmpdir(), 'check-layers-'));
  tempRoots.push(root);
  writeFile(join(root, 'tooling', 'vitest.shared.js'), 'export default {};\n');
  const entries = [
    ...Object.entries(packages).map(([folder, spec]) => ['packages', folder, publicManifest(folder), spec]),
    ...Object.entries(examples).map(([folder, spec]) => ['examples', folder, exampleManifest(folder), spec]),
  ];
  for (const [parent, folder, baseManifest, { manifest = {}, files = {}, readme = true }] of entries) {
    const dir = join(root, parent, folder);
    writeFile(join(dir, 'package.json'), JSON.stringify({ ...baseManifest, ...manifest }, null, 2));
    if (readme) writeFile(join(dir, 'README.md'), `# ${baseManifest.name}\n`);
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
          'const example = "import x from \'@leasehold/contracts/src/codec.js\'";',
          'export { encode, example };',
          'export type { Registration };',
          '',
        ].join('\n'),
        'test/files.test.ts':
          "import { temporaryRoot } from '@leasehold/test-utils';\nimport { encode } from '../src/index.js';\n",
      },
    },
    registry: {
      manifest: { dependencies: { '@leasehold/contracts': 'workspace:^', '@leasehold/private-files': 'workspace:^' } },
      files: {
        'src/index.ts':
          "export * from '@leasehold/private-files';\nexport const load = () => import('@leasehold/contracts');\n",
      },
    },
    'test-utils': {
      manifest: { private: true, dependencies: { '@leasehold/contracts': 'workspace:^' } },
      files: {
        'src/index.ts': "export { encode } from '@leasehold/contracts';\nexport const temporaryRoot = () => '/tmp';\n",
      },
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
      '@leasehold/contracts packages/contracts/package.json: depends on @leasehold/registry (dependencies), which is not below it in the layers (contracts may use: none)',
    ]);
  });

  it('refuses a layer that depends on itself or on a layer that is not below it, even as a devDependency', () => {
    const packages = cleanPackages();
    packages.coordination = {};
    packages.registry.manifest.dependencies['@leasehold/registry'] = 'workspace:^';
    packages['private-files'].manifest.devDependencies['@leasehold/coordination'] = 'workspace:*';

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toContain(
      '@leasehold/registry packages/registry/package.json: depends on itself (dependencies)',
    );
    expect(violations).toContain(
      '@leasehold/private-files packages/private-files/package.json: depends on @leasehold/coordination (devDependencies), which is not below it in the layers (private-files may use: contracts)',
    );
    expect(violations).toHaveLength(2);
  });

  it('refuses internal ranges other than workspace:^ at runtime and workspace:* for development', () => {
    const packages = cleanPackages();
    packages['private-files'].manifest.dependencies['@leasehold/contracts'] = '^0.1.0';
    packages.registry.manifest.dependencies['@leasehold/contracts'] = 'workspace:*';
    packages.registry.manifest.devDependencies = { '@leasehold/test-utils': 'workspace:^' };
    packages.registry.manifest.peerDependencies = { '@leasehold/private-files': 'workspace:~' };
    packages['test-utils'].manifest.optionalDependencies = { '@leasehold/contracts': 'file:../contracts' };

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/private-files packages/private-files/package.json: dependencies["@leasehold/contracts"] is "^0.1.0"; a runtime internal dependency must be "workspace:^"',
      '@leasehold/registry packages/registry/package.json: dependencies["@leasehold/contracts"] is "workspace:*"; a runtime internal dependency must be "workspace:^"',
      '@leasehold/registry packages/registry/package.json: peerDependencies["@leasehold/private-files"] is "workspace:~"; a runtime internal dependency must be "workspace:^"',
      '@leasehold/registry packages/registry/package.json: devDependencies["@leasehold/test-utils"] is "workspace:^"; a dev-only internal dependency must be "workspace:*"',
      '@leasehold/test-utils packages/test-utils/package.json: optionalDependencies["@leasehold/contracts"] is "file:../contracts"; a runtime internal dependency must be "workspace:^"',
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
      '@leasehold/contracts packages/contracts/src/owner.ts:1: imports "@leasehold/registry", which is not below it in the layers (contracts may use: none)',
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
      '@leasehold/private-files packages/private-files/package.json: depends at runtime on @leasehold/test-utils (dependencies), which is a helper, not a layer; a layered package may use a helper package only as a devDependency',
      '@leasehold/registry packages/registry/package.json: depends at runtime on @leasehold/test-utils (peerDependencies), which is a helper, not a layer; a layered package may use a helper package only as a devDependency',
    ]);
  });

  it('refuses a package outside the layer map, a missing README or exports map, and a dependency outside the workspace', () => {
    const packages = cleanPackages();
    packages.metrics = { readme: false, manifest: { exports: undefined } };
    packages.contracts.manifest = { exports: { './codec': './dist/codec.js' } };
    packages.registry.manifest.dependencies['@leasehold/coordination'] = 'workspace:^';

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/contracts packages/contracts/package.json: its "exports" map has no "." entry',
      '@leasehold/metrics packages/metrics/package.json: is not in the layer map (tooling/scripts/check-layers.mjs): place it as a layer, with the layers it may use, or as a private helper',
      '@leasehold/metrics packages/metrics/package.json: has no README.md',
      '@leasehold/metrics packages/metrics/package.json: has no "exports" map',
      '@leasehold/registry packages/registry/package.json: depends on @leasehold/coordination (dependencies), which is not a package in this workspace',
      '@leasehold/registry packages/registry/package.json: depends on @leasehold/coordination (dependencies), which is not below it in the layers (registry may use: contracts, private-files)',
    ]);
  });

  it('refuses a symbolic link to a source file or folder, which the check cannot follow', () => {
    const root = makeRepository(cleanPackages());
    symlinkSync(
      join(root, 'packages', 'contracts', 'src', 'codec.ts'),
      join(root, 'packages', 'registry', 'src', 'codec.ts'),
    );

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

/** The clean repository plus every upper layer, each using what it may: coordination, the siblings, etcd and cli. */
function dagPackages() {
  const packages = cleanPackages();
  const runtime = (...names) => Object.fromEntries(names.map((name) => [`@leasehold/${name}`, 'workspace:^']));
  const importing = (...names) =>
    names.map((name, index) => `export * as l${index} from '@leasehold/${name}';\n`).join('');
  const layer = (...names) => ({
    manifest: { dependencies: runtime(...names), devDependencies: { '@leasehold/test-utils': 'workspace:*' } },
    files: {
      'src/index.ts': importing(...names),
      'test/index.test.ts': "import { temporaryRoot } from '@leasehold/test-utils';\n",
    },
  });
  packages.coordination = layer('contracts', 'private-files', 'registry');
  packages.recovery = layer('contracts', 'coordination');
  packages.transport = layer('contracts', 'private-files', 'coordination');
  packages.etcd = layer('contracts', 'private-files');
  packages.cli = layer('contracts', 'recovery', 'transport', 'etcd');
  return packages;
}

describe('the seam', () => {
  it('is the one the README names: cli imports no private-files, registry or coordination, transport no registry', () => {
    expect(belowTheSeam).toEqual({ cli: ['private-files', 'registry', 'coordination'], transport: ['registry'] });
    expect(seamProblems(belowTheSeam, layers)).toEqual([]);
  });

  it('refuses a layer above it that imports or depends at runtime on a layer below it', () => {
    const packages = dagPackages();
    Object.assign(packages.cli.manifest.dependencies, {
      '@leasehold/coordination': 'workspace:^',
      '@leasehold/private-files': 'workspace:^',
    });
    packages.cli.files['src/status.ts'] =
      "import { workspacePlaces } from '@leasehold/coordination';\nimport { isErrno } from '@leasehold/private-files';\n";
    packages.transport.manifest.dependencies['@leasehold/registry'] = 'workspace:^';
    packages.transport.files['src/claim.ts'] = "import { Registry } from '@leasehold/registry';\n";
    const because = (layer) =>
      `which is below the seam for ${layer}: use the seam (Ownership, Recovery of @leasehold/contracts) or the re-exports of the layer right below it; only its tests may use it, as a devDependency`;

    expect(checkLayers(makeRepository(packages)).violations).toEqual([
      `@leasehold/cli packages/cli/package.json: depends at runtime on @leasehold/coordination (dependencies), ${because('cli')}`,
      `@leasehold/cli packages/cli/package.json: depends at runtime on @leasehold/private-files (dependencies), ${because('cli')}`,
      `@leasehold/cli packages/cli/src/status.ts:1: imports "@leasehold/coordination", ${because('cli')}`,
      `@leasehold/cli packages/cli/src/status.ts:2: imports "@leasehold/private-files", ${because('cli')}`,
      `@leasehold/transport packages/transport/package.json: depends at runtime on @leasehold/registry (dependencies), ${because('transport')}`,
      `@leasehold/transport packages/transport/src/claim.ts:1: imports "@leasehold/registry", ${because('transport')}`,
    ]);
  });

  it("passes its tests' imports of them as devDependencies, and transport's of private-files and coordination", () => {
    const packages = dagPackages();
    Object.assign(packages.cli.manifest.devDependencies, {
      '@leasehold/registry': 'workspace:*',
      '@leasehold/private-files': 'workspace:*',
    });
    packages.cli.files['src/liveness.test.ts'] = "import { processIdentity } from '@leasehold/private-files';\n";
    packages.cli.files['test/fixtures/writer.mjs'] = "import { Registry } from '@leasehold/registry';\n";

    expect(checkLayers(makeRepository(packages)).violations).toEqual([]);
    expect(packages.transport.files['src/index.ts']).toContain('@leasehold/coordination');
  });

  it('refuses a seam map that names no layer, or a layer the layer may not use anyway', () => {
    expect(seamProblems({ cli: ['registry'], transport: ['recovery'], metrics: ['contracts'] }, layers)).toEqual([
      'transport has recovery below its seam, which it may not use anyway',
      'metrics has a seam but is not a layer',
    ]);
  });
});

describe('the layer DAG', () => {
  it('passes the upper layers, with cli importing recovery, transport and etcd (and nothing below the seam)', () => {
    expect(checkLayers(makeRepository(dagPackages()))).toEqual({ violations: [], packages: 9, files: 17 });
  });

  it('refuses transport importing its sibling recovery', () => {
    const packages = dagPackages();
    packages.transport.manifest.dependencies['@leasehold/recovery'] = 'workspace:^';
    packages.transport.files['src/recover.ts'] =
      "import { recover } from '@leasehold/recovery';\nexport { recover };\n";

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/transport packages/transport/package.json: depends on @leasehold/recovery (dependencies), which is not below it in the layers (transport may use: contracts, private-files, registry, coordination)',
      '@leasehold/transport packages/transport/src/recover.ts:1: imports "@leasehold/recovery", which is not below it in the layers (transport may use: contracts, private-files, registry, coordination)',
    ]);
  });

  it('refuses recovery importing its sibling transport, even as a devDependency of a test', () => {
    const packages = dagPackages();
    packages.recovery.manifest.devDependencies['@leasehold/transport'] = 'workspace:*';
    packages.recovery.files['test/connect.test.ts'] = "const { connect } = await import('@leasehold/transport');\n";

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/recovery packages/recovery/package.json: depends on @leasehold/transport (devDependencies), which is not below it in the layers (recovery may use: contracts, private-files, registry, coordination)',
      '@leasehold/recovery packages/recovery/test/connect.test.ts:1: imports "@leasehold/transport", which is not below it in the layers (recovery may use: contracts, private-files, registry, coordination)',
    ]);
  });

  it('refuses etcd importing registry: it may use contracts and private-files only', () => {
    const packages = dagPackages();
    packages.etcd.manifest.dependencies['@leasehold/registry'] = 'workspace:^';
    packages.etcd.files['src/table.ts'] = "export type { Registry } from '@leasehold/registry';\n";

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/etcd packages/etcd/package.json: depends on @leasehold/registry (dependencies), which is not below it in the layers (etcd may use: contracts, private-files)',
      '@leasehold/etcd packages/etcd/src/table.ts:1: imports "@leasehold/registry", which is not below it in the layers (etcd may use: contracts, private-files)',
    ]);
  });

  it('refuses a package that is not in the map, even a private one, and a layer that uses it', () => {
    const packages = dagPackages();
    packages.metrics = { manifest: { private: true, dependencies: { '@leasehold/contracts': 'workspace:^' } } };
    packages.cli.manifest.dependencies['@leasehold/metrics'] = 'workspace:^';
    packages.cli.files['src/metrics.ts'] = "export * from '@leasehold/metrics';\n";

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/cli packages/cli/package.json: depends on @leasehold/metrics (dependencies), which is not below it in the layers (cli may use: contracts, private-files, registry, coordination, recovery, transport, etcd, state-home)',
      '@leasehold/cli packages/cli/src/metrics.ts:1: imports "@leasehold/metrics", which is not below it in the layers (cli may use: contracts, private-files, registry, coordination, recovery, transport, etcd, state-home)',
      '@leasehold/metrics packages/metrics/package.json: is not in the layer map (tooling/scripts/check-layers.mjs): place it as a layer, with the layers it may use, or as a private helper',
    ]);
  });

  it('passes while transport does not exist or is only a folder, and refuses a dependency on it then', () => {
    const packages = dagPackages();
    delete packages.transport;
    packages.cli = {
      manifest: { dependencies: { '@leasehold/recovery': 'workspace:^' } },
      files: { 'src/index.ts': "export * from '@leasehold/recovery';\n" },
    };
    const root = makeRepository(packages);
    writeFile(join(root, 'packages', 'transport', 'src', 'index.ts'), "import '@leasehold/recovery';\n");

    expect(checkLayers(root).violations).toEqual([]);

    packages.cli.manifest.dependencies['@leasehold/transport'] = 'workspace:^';
    expect(checkLayers(makeRepository(packages)).violations).toEqual([
      '@leasehold/cli packages/cli/package.json: depends on @leasehold/transport (dependencies), which is not a package in this workspace',
    ]);
  });

  it('refuses a helper that is published or uses a layer outside its entry', () => {
    const packages = dagPackages();
    packages['test-utils'].manifest.private = undefined;
    packages['test-utils'].manifest.dependencies['@leasehold/coordination'] = 'workspace:^';

    const { violations } = checkLayers(makeRepository(packages));

    expect(violations).toEqual([
      '@leasehold/test-utils packages/test-utils/package.json: is a helper, so it must be "private": true',
      '@leasehold/test-utils packages/test-utils/package.json: depends on @leasehold/coordination (dependencies), which the helper test-utils may not use (it may use: contracts)',
    ]);
  });
});

describe('the layer map', () => {
  it('is transitively closed and acyclic, with recovery and transport siblings', () => {
    expect(layerMapProblems(layers, helpers)).toEqual([]);
    expect(layers.recovery).not.toContain('transport');
    expect(layers.transport).not.toContain('recovery');
    expect(layers.etcd).toEqual(['contracts', 'private-files']);
    expect(describeLayers()).toBe(dag);
  });

  it('refuses a map that is not closed, has a cycle, or names a package that is not a layer', () => {
    expect(
      layerMapProblems(
        {
          contracts: [],
          registry: ['private-files'],
          'private-files': ['contracts', 'private-files'],
          cli: ['registry'],
          a: ['b'],
          b: ['a'],
        },
        { 'test-utils': ['metrics'], bench: ['bench', 'test-utils'], probe: ['contracts'], loop: ['probe'] },
      ),
    ).toEqual([
      'layer registry may use private-files but not what private-files may use: contracts (the map must be transitively closed)',
      'layer private-files may use itself',
      'layer cli may use registry but not what registry may use: private-files (the map must be transitively closed)',
      'layer a may use b but not what b may use: a (the map must be transitively closed)',
      'layer b may use a but not what a may use: b (the map must be transitively closed)',
      'helper test-utils may use metrics, which is neither a layer nor a helper',
      'helper bench may use itself',
      'helper bench may use test-utils but not what test-utils may use: metrics',
      'helper loop may use probe but not what probe may use: contracts',
    ]);
  });
});

describe('the package-checks helper', () => {
  it('may be a devDependency of any layer, contracts included, and may use no layer itself', () => {
    const packages = cleanPackages();
    packages['package-checks'] = {
      manifest: { private: true, dependencies: { '@leasehold/contracts': 'workspace:^' } },
    };
    packages.contracts.manifest = { devDependencies: { '@leasehold/package-checks': 'workspace:*' } };
    packages.contracts.files['src/index.test.ts'] = "import { publicNames } from '@leasehold/package-checks';\n";

    const { violations } = checkLayers(makeRepository(packages));

    expect(helpers['package-checks']).toEqual([]);
    expect(violations).toEqual([
      '@leasehold/package-checks packages/package-checks/package.json: depends on @leasehold/contracts (dependencies), which the helper package-checks may not use (it may use: none)',
    ]);
  });
});

describe('examples', () => {
  /** The DAG repository and an example daemon that uses layers at runtime and test-utils in its tests. */
  function daemonExample() {
    return {
      daemon: {
        manifest: {
          dependencies: {
            '@leasehold/coordination': 'workspace:^',
            '@leasehold/transport': 'workspace:^',
            '@leasehold/cli': 'workspace:^',
          },
          devDependencies: { '@leasehold/test-utils': 'workspace:*' },
        },
        files: {
          'src/daemon.ts':
            "import { acquire } from '@leasehold/coordination';\nimport { serve } from '@leasehold/transport';\nexport { acquire, serve };\n",
          'src/daemon.test.ts':
            "import { temporaryRoot } from '@leasehold/test-utils';\nconst cli = import.meta.resolve('@leasehold/cli/package.json');\n",
          'vitest.config.ts': "export { default } from '../../tooling/vitest.shared.js';\n",
        },
      },
    };
  }

  it('passes an example that uses any layer through its entry point, without an exports map', () => {
    expect(checkLayers(makeRepository(dagPackages(), daemonExample()))).toEqual({
      violations: [],
      packages: 10,
      files: 21,
    });
  });

  it('refuses deep and relative imports, wrong ranges, a runtime helper, and a published or misnamed example', () => {
    const examples = daemonExample();
    const daemon = examples.daemon;
    daemon.manifest.name = '@leasehold/daemon';
    daemon.manifest.private = undefined;
    daemon.manifest.dependencies['@leasehold/coordination'] = 'workspace:*';
    daemon.manifest.dependencies['@leasehold/test-utils'] = 'workspace:^';
    daemon.files['src/deep.ts'] = [
      "import { bearer } from '@leasehold/transport/dist/bearer.js';",
      "import { fence } from '../../../packages/coordination/src/fence.js';",
      '',
    ].join('\n');

    const { violations } = checkLayers(makeRepository(dagPackages(), examples));

    expect(violations).toEqual([
      '@leasehold/daemon examples/daemon/package.json: folder examples/daemon must hold the package "@leasehold/example-daemon", not "@leasehold/daemon"',
      '@leasehold/daemon examples/daemon/package.json: is an example, so it must be "private": true',
      '@leasehold/daemon examples/daemon/package.json: dependencies["@leasehold/coordination"] is "workspace:*"; a runtime internal dependency must be "workspace:^"',
      '@leasehold/daemon examples/daemon/package.json: depends at runtime on @leasehold/test-utils (dependencies), which is a helper, not a layer; an example may use a helper package only as a devDependency',
      '@leasehold/daemon examples/daemon/src/deep.ts:1: deep import "@leasehold/transport/dist/bearer.js"; import the public entry point "@leasehold/transport"',
      '@leasehold/daemon examples/daemon/src/deep.ts:2: import "../../../packages/coordination/src/fence.js" reaches into another package (packages/coordination); import its public entry point instead',
    ]);
  });

  it('refuses an example without a README, an undeclared import, and a layer that uses an example', () => {
    const examples = daemonExample();
    examples.daemon.readme = false;
    delete examples.daemon.manifest.dependencies['@leasehold/transport'];
    const packages = dagPackages();
    packages.cli.manifest.devDependencies['@leasehold/example-daemon'] = 'workspace:*';

    const { violations } = checkLayers(makeRepository(packages, examples));

    expect(violations).toEqual([
      '@leasehold/cli packages/cli/package.json: depends on @leasehold/example-daemon (devDependencies), which is not below it in the layers (cli may use: contracts, private-files, registry, coordination, recovery, transport, etcd, state-home)',
      '@leasehold/example-daemon examples/daemon/package.json: has no README.md',
      '@leasehold/example-daemon examples/daemon/src/daemon.ts:2: imports "@leasehold/transport", which is not declared in its package.json',
    ]);
  });
});

describe('findImportSpecifiers', () => {
  it('finds every form of import and nothing in comments, strings, regular expressions or templates', () => {
    const source = [
      "import a from 'static';",
      'import type { B } from "type-only";',
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
      'const quote = /[\'"]/g; const text = "import y from \'in-a-string\'";',
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

describe('findImportSpecifiers, reading a file as TypeScript does', () => {
  it('finds resolver and mock calls by their whole dotted name only', () => {
    const source = [
      "const a = require.resolve('resolved');",
      "const b = import.meta.resolve('meta-resolved');",
      "vi.doMock('do-mocked'); await vi.importActual('actual'); await vi.importMock('import-mocked');",
      "import c = require('import-equals');",
      "loader.require('not-require'); other.import('not-import'); vi.fn('not-a-mock');",
      '',
    ].join('\n');

    expect(findImportSpecifiers(source).map(({ specifier }) => specifier)).toEqual([
      'resolved',
      'meta-resolved',
      'do-mocked',
      'actual',
      'import-mocked',
      'import-equals',
    ]);
  });

  it('counts lines after a hashbang, and is not misled by a regular expression after `)`', () => {
    const source = [
      '#!/usr/bin/env node',
      "import a from 'after-hashbang';",
      "if (a) /['\"]/.test(a) && require('after-regex');",
      '',
    ].join('\n');

    expect(findImportSpecifiers(source, 'bin.mjs')).toEqual([
      { specifier: 'after-hashbang', line: 2 },
      { specifier: 'after-regex', line: 3 },
    ]);
  });

  it('parses JSX in .tsx and .jsx files, where text that reads like an import is not one', () => {
    const source = [
      "import { render } from 'renderer';",
      "export const Help = () => <p>import x from 'not-a-module'</p>;",
      "export const lazy = () => import('lazy-view');",
      '',
    ].join('\n');

    for (const fileName of ['help.tsx', 'help.jsx']) {
      expect(findImportSpecifiers(source, fileName).map(({ specifier }) => specifier)).toEqual([
        'renderer',
        'lazy-view',
      ]);
    }
  });

  it('does not count an ambient module declaration, which loads nothing', () => {
    expect(findImportSpecifiers("declare module 'augmented' {}\nexport {};\n")).toEqual([]);
  });
});

describe('the check-layers command', () => {
  function run(repoRoot) {
    return spawnSync(process.execPath, [scriptFile, repoRoot], { encoding: 'utf8' });
  }

  it('prints one OK line and exits 0 on a clean repository', () => {
    const result = run(makeRepository(cleanPackages()));

    expect(result.status).toBe(0);
    expect(result.stdout).toBe(`check-layers: OK, 4 packages, 7 source files (${dag})\n`);
  });

  it('prints one line per violation and exits 1', () => {
    const packages = cleanPackages();
    packages.contracts.manifest = { dependencies: { '@leasehold/registry': 'workspace:^' } };
    packages.registry.files['src/deep.ts'] = "import { encode } from '@leasehold/contracts/dist/codec.js';\n";

    const result = run(makeRepository(packages));

    expect(result.status).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      '@leasehold/contracts packages/contracts/package.json: depends on @leasehold/registry (dependencies), which is not below it in the layers (contracts may use: none)',
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

  it('checks every workspace package, examples and package-checks included', () => {
    const withManifest = (parent) =>
      readdirSync(join(realRepoRoot, parent)).filter((folder) =>
        existsSync(join(realRepoRoot, parent, folder, 'package.json')),
      );
    const workspacePackages = [
      ...withManifest('packages').map((folder) => `packages/${folder}`),
      ...withManifest('examples').map((folder) => `examples/${folder}`),
    ];

    expect(workspacePackages).toContain('examples/daemon');
    expect(workspacePackages).toContain('packages/package-checks');
    expect(checkLayers(realRepoRoot).packages).toBe(workspacePackages.length);
  });
});
