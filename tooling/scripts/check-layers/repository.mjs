// The workspace as the layer check sees it: each package under packages/ and examples/, what
// kind it is (a layer, a helper, an example, or not placed) and, from the layer map, what it
// may use. The map itself is ../check-layers.mjs's, passed in, so that it stays in the one
// file a new package is placed in.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const scope = '@leasehold/';
// Examples (examples/<folder>, named @leasehold/example-<folder>) are
// downstream users: they may use every published layer, never the other way.
const examplePrefix = `${scope}example-`;
export const runtimeFields = ['dependencies', 'peerDependencies', 'optionalDependencies'];
export const devFields = ['devDependencies'];

/**
 * The packages under `<root>/packages`, and the examples under `<root>/examples` when that
 * folder exists, each with what it may use under `map` (the layers and the helpers).
 * @throws {Error} when `<root>/packages` is not a folder
 */
export function loadRepository(root, map) {
  const packagesDir = join(root, 'packages');
  if (!existsSync(packagesDir) || !statSync(packagesDir).isDirectory()) {
    throw new Error(`check-layers: ${packagesDir} is not a folder`);
  }
  const examplesDir = join(root, 'examples');
  const packages = [
    ...listPackages(packagesDir, 'packages', map),
    ...(existsSync(examplesDir) && statSync(examplesDir).isDirectory()
      ? listPackages(examplesDir, 'examples', map)
      : []),
  ];
  const byName = new Map(packages.map((workspacePackage) => [workspacePackage.name, workspacePackage]));
  return { root, packagesDir, toolingDir: join(root, 'tooling'), packages, byName };
}

// A folder without package.json is not a workspace package to pnpm (it may
// be one being started), so there is nothing in it to build, publish or check.
function listPackages(parentDir, parent, map) {
  return readdirSync(parentDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(parentDir, entry.name, 'package.json')))
    .map((entry) => loadPackage(join(parentDir, entry.name), parent, entry.name, map))
    .sort((left, right) => left.folder.localeCompare(right.folder));
}

function loadPackage(dir, parent, folder, map) {
  const manifestFile = join(dir, 'package.json');
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(manifestFile, 'utf8'));
  } catch {
    manifest = undefined;
  }
  const name = typeof manifest?.name === 'string' ? manifest.name : undefined;
  const isExample = parent === 'examples';
  const workspacePackage = {
    dir,
    folder,
    manifestFile,
    manifest,
    name,
    label: name ?? `${parent}/${folder}`,
    expectedName: isExample ? examplePrefix + folder : scope + folder,
    where: `${parent}/${folder}`,
    kind: isExample ? 'example' : kindOf(name, map),
    isPrivate: manifest?.private === true,
  };
  return { ...workspacePackage, allowance: allowanceOf(workspacePackage, map) };
}

/** `layer`, `helper` or `unknown` for a name under packages/. */
function kindOf(name, { layers, helpers }) {
  const shortName = name?.startsWith(scope) ? name.slice(scope.length) : undefined;
  if (shortName !== undefined && Object.hasOwn(layers, shortName)) return 'layer';
  if (shortName !== undefined && Object.hasOwn(helpers, shortName)) return 'helper';
  return 'unknown';
}

const qualify = (shortNames) => shortNames.map((shortName) => scope + shortName);

/**
 * What a package may use: at runtime, and in all (runtime plus dev-only, the
 * helpers); `because` says why another name is refused. Undefined for a
 * package that is not placed (it is refused for that alone).
 */
function allowanceOf(workspacePackage, { layers, helpers, belowTheSeam = {} }) {
  const shortName = workspacePackage.name?.slice(scope.length);
  const helperNames = qualify(Object.keys(helpers));
  const list = (names) => (names.length === 0 ? 'none' : names.join(', '));
  if (workspacePackage.kind === 'layer') {
    const below = layers[shortName];
    const seam = belowTheSeam[shortName] ?? [];
    return {
      runtime: new Set(qualify(below.filter((name) => !seam.includes(name)))),
      all: new Set([...qualify(below), ...helperNames]),
      // Below the seam: only its tests may use it, as a devDependency.
      seam: new Set(qualify(seam)),
      because: `which is not below it in the layers (${shortName} may use: ${list(below)})`,
      belowSeam: `which is below the seam for ${shortName}: use the seam (Ownership, Recovery of @leasehold/contracts) or the re-exports of the layer right below it; only its tests may use it, as a devDependency`,
      who: 'a layered package',
    };
  }
  if (workspacePackage.kind === 'helper') {
    const uses = helpers[shortName];
    return {
      runtime: new Set(qualify(uses)),
      all: new Set(qualify(uses)),
      because: `which the helper ${shortName} may not use (it may use: ${list(uses)})`,
      who: 'a helper',
    };
  }
  if (workspacePackage.kind === 'example') {
    const published = Object.keys(layers);
    return {
      runtime: new Set(qualify(published)),
      all: new Set([...qualify(published), ...helperNames]),
      because: 'which is not a layer; an example may use the layers (and helpers as devDependencies) only',
      who: 'an example',
    };
  }
  return undefined;
}

/** Every internal or external package name the manifest declares, runtime or dev-only. */
export function declaredDependencies(manifest) {
  const names = new Set();
  for (const field of [...runtimeFields, ...devFields]) {
    const dependencies = manifest?.[field];
    if (typeof dependencies === 'object' && dependencies !== null) {
      for (const name of Object.keys(dependencies)) names.add(name);
    }
  }
  return names;
}
