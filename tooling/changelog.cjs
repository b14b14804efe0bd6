// The changelog lines of `changeset version`: each change as its author wrote
// it for the package's users, with no commit hash (our changesets carry no
// link target, and a bare hash tells a reader nothing), and a dependency
// update as the names and versions it moved to.
'use strict';

/** One entry: the changeset's summary, its later lines indented under the first. */
async function getReleaseLine(changeset) {
  const [first, ...rest] = changeset.summary.trim().split('\n');
  return [`- ${first}`, ...rest.map((line) => (line.trim() === '' ? '' : `  ${line}`))].join('\n');
}

/** One entry for the Leasehold packages this release moved to, or nothing when there are none. */
async function getDependencyReleaseLine(changesets, dependenciesUpdated) {
  if (dependenciesUpdated.length === 0) return '';
  return [
    '- Updated dependencies:',
    ...dependenciesUpdated.map((dependency) => `  - ${dependency.name}@${dependency.newVersion}`),
  ].join('\n');
}

module.exports = { getReleaseLine, getDependencyReleaseLine };
