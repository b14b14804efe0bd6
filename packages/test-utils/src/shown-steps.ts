import { posix } from 'node:path';
import { handPlaces } from './hand-places.js';

// Steps are shown relative to the test folder: `state` is the state home, `<ws>` the workspace's private
// root, `<temp>` a staged file, `<folder>` a staged folder and `<record>` a journal record.
const STAGING = 'state/v1/.staging';

/** A step as a fixture printed it, shown relative to the test folder, with `<ws>`, `<temp>`, `<folder>` and `<record>`. */
export function shownStep(
  message: Record<string, unknown>,
  place: { readonly base: string; readonly stateHome: string },
  root: string,
): string {
  const step = message.step as { operation: string; action: string; path: string };
  let path = step.path === place.base ? '<base>' : step.path.slice(place.base.length + 1);
  path = path.replace(handPlaces(place.stateHome, root).privateRootName, '<ws>');
  path = path
    .replace(/\.staging\/[^/]+\.tmp$/, '.staging/<temp>')
    .replace(/\.staging\/[^/]+\.dir(\/|$)/, '.staging/<folder>$1')
    .replace(/journal\/[^/]+\.json$/, 'journal/<record>')
    .replace(/\.leasehold\/\.[^/]+\.tmp$/, '.leasehold/<temp>');
  return `${step.operation} ${step.action} ${path}`;
}

/** How a create or remove was asked to publish: private-files' `PublishOptions`. */
export interface ShownPublish {
  /** False: the step list has no folder fsync (as private-files skips it). */
  readonly syncFolder?: boolean;
}

/** The shown steps of a private-files create of `path` (docs/persistence.md, "Publishing a file"): staged, fsynced, linked, unlinked, folder fsynced (unless `syncFolder: false`). */
export function createSteps(path: string, options: ShownPublish = {}): string[] {
  return [
    `create write ${STAGING}/<temp>`,
    `create fsync ${STAGING}/<temp>`,
    `create link ${path}`,
    `create unlink ${STAGING}/<temp>`,
    ...(options.syncFolder === false ? [] : [`create fsync-directory ${posix.dirname(path)}`]),
  ];
}

/** The shown steps of a private-files replace of `path` (docs/persistence.md, "Publishing a file"): staged, fsynced, renamed over it, folder fsynced (unless `syncFolder: false`). */
export function replaceSteps(path: string, options: ShownPublish = {}): string[] {
  return [
    `replace write ${STAGING}/<temp>`,
    `replace fsync ${STAGING}/<temp>`,
    `replace rename ${path}`,
    ...(options.syncFolder === false ? [] : [`replace fsync-directory ${posix.dirname(path)}`]),
  ];
}

/** The shown steps of a private-files remove of `path` (docs/persistence.md, "Removing a file or folder"): unlinked, folder fsynced (unless `syncFolder: false`). */
export function removeSteps(path: string, options: ShownPublish = {}): string[] {
  return [
    `remove unlink ${path}`,
    ...(options.syncFolder === false ? [] : [`remove fsync-directory ${posix.dirname(path)}`]),
  ];
}

/**
 * The shown steps of an acquire's owner files, outside the registry lock, in
 * acquire's order (docs/ownership.md, "Acquire"), for the workspace's private
 * root `workspace`: the checkout lock, then in its service folder owner.lock
 * without a folder fsync (the capability's covers it: docs/persistence.md,
 * "Publishing without the folder fsync"), then the capability.
 */
export function ownerFilesSteps(workspace: string): string[] {
  return [
    ...createSteps(`${workspace}/checkout.lock`),
    ...createSteps(`${workspace}/service/owner.lock`, { syncFolder: false }),
    ...createSteps(`${workspace}/service/local-capability.json`),
  ];
}

/**
 * The shown steps of a release's (and a recovery's) changes to the service
 * folder `service`: the registration `stopped` and the capability removed
 * without a folder fsync, then owner.lock removed with the one fsync of the
 * folder for all three (coordination's `releaseInOrder`).
 */
export function releaseServiceSteps(service: string): string[] {
  return [
    ...replaceSteps(`${service}/registration.json`, { syncFolder: false }),
    ...removeSteps(`${service}/local-capability.json`, { syncFolder: false }),
    ...removeSteps(`${service}/owner.lock`),
  ];
}

/** The shown steps of the create of the registry lock at `path` (registry's `LOCK_PUBLISH`): no folder fsync of its own. */
export function lockCreateSteps(path: string): string[] {
  return createSteps(path, { syncFolder: false });
}

/** The shown steps of the remove of the registry lock at `path` (registry's `LOCK_PUBLISH`): no folder fsync of its own. */
export function lockRemoveSteps(path: string): string[] {
  return removeSteps(path, { syncFolder: false });
}

/** The shown steps of a private-files createFolder of `path` with `names` (docs/persistence.md, "Publishing a folder"): staged whole, renamed into place. */
export function createFolderSteps(path: string, names: readonly string[]): string[] {
  return [
    `create-folder mkdir ${STAGING}/<folder>`,
    ...names.flatMap((name) => [
      `create-folder write ${STAGING}/<folder>/${name}`,
      `create-folder fsync ${STAGING}/<folder>/${name}`,
    ]),
    `create-folder fsync-directory ${STAGING}/<folder>`,
    `create-folder rename ${path}`,
    `create-folder fsync-directory ${posix.dirname(path)}`,
  ];
}

/**
 * The shown steps of publishing the folder's own mark in the workspace `root` (shown relative to
 * the test folder): with `newFolder`, the dot-folder made (0755 under the usual umask, the workspace folder fsynced) and
 * its `.gitignore` published without a folder fsync of its own; then the mark, staged beside it,
 * fsynced, linked, unlinked, and the dot-folder fsynced.
 */
export function markCreateSteps(root: string, options: { readonly newFolder?: boolean } = {}): string[] {
  const folder = `${root}/.leasehold`;
  const published = (path: string) => [
    `create write ${folder}/<temp>`,
    `create fsync ${folder}/<temp>`,
    `create link ${path}`,
    `create unlink ${folder}/<temp>`,
  ];
  return [
    ...(options.newFolder === true
      ? [
          // No chmod under the usual umask (022): mkdir's 0755 is kept.
          `create mkdir ${folder}`,
          `create fsync-directory ${root}`,
          ...published(`${folder}/.gitignore`),
        ]
      : []),
    ...published(`${folder}/owner.json`),
    `create fsync-directory ${folder}`,
  ];
}

/** The shown steps of removing the folder's own mark in the workspace `root`: unlinked, the dot-folder fsynced. */
export function markRemoveSteps(root: string): string[] {
  return removeSteps(`${root}/.leasehold/owner.json`);
}
