import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PrivateFiles, type FileSnapshot } from '@leasehold/private-files';
import writeFileAtomic from 'write-file-atomic';
import { bareCreate, bareRemove, bareReplace, fsyncFolder, writeNewFile } from './bare-files.js';
import { documentBytes, type BenchPlace } from './fixtures.js';
import { timed, type Operation } from './harness.js';

// Sections 1 and 2: the floors, private-files, and its peers
// (write-file-atomic, readFileSync). Every clean-up that changes a folder
// ends with a folder fsync, off the clock, so that no operation pays for
// the journal of the one before it.

/** Removes a file the benchmark made, and makes that durable (off the clock). */
function cleanUp(folder: string, name: string): void {
  unlinkSync(join(folder, name));
  fsyncFolder(folder);
}

/** The floor, private-files and peer operations on small files (one ~230-byte document). */
export function fileOperations(place: BenchPlace): Operation[] {
  const bytes = documentBytes();
  const buffer = Buffer.from(bytes);
  const plain = place.folder('plain');
  const probes = place.folder('probes');
  const bare = place.folder('bare', 'documents');
  const bareStaging = place.folder('bare', 'staging');
  const files = new PrivateFiles(place.folder('files'));
  const documents = place.folder('files', 'documents');
  const peer = place.folder('write-file-atomic');

  // Fixed files for the operations that replace or read in place.
  const bareReplaced = join(bare, 'replaced.json');
  bareCreate(bareReplaced, join(bareStaging, 'seed'), bytes);
  let replaced: FileSnapshot = files.create(join(documents, 'replaced.json'), bytes);
  const read = join(documents, 'read.json');
  files.create(read, bytes);
  const peerReplaced = join(peer, 'replaced.json');
  const peerReplacedDurable = join(peer, 'replaced-durable.json');
  writeFileAtomic.sync(peerReplaced, buffer, { mode: 0o600 });
  writeFileAtomic.sync(peerReplacedDurable, buffer, { mode: 0o600 });
  fsyncFolder(peer);

  const fresh = (prefix: string) => place.unique(prefix);

  return [
    // 1. Floors.
    timed('fs.write', 'writeFileSync, new small file, no fsync', {
      prepare: () => fresh('plain'),
      run: (name) => writeFileSync(join(plain, name), bytes, { flag: 'wx', mode: 0o600 }),
      finish: (name) => cleanUp(plain, name),
    }),
    timed('floor.fsync-file', 'fsync of a newly written small file', {
      prepare: () => {
        const name = fresh('probe');
        return { name, descriptor: writeNewFile(join(probes, name), bytes) };
      },
      run: ({ descriptor }) => fsyncSync(descriptor),
      finish: ({ name, descriptor }) => {
        closeSync(descriptor);
        cleanUp(probes, name);
      },
    }),
    timed('floor.fsync-folder', 'fsync of a folder after an entry changed', {
      prepare: () => {
        const name = fresh('entry');
        closeSync(openSync(join(probes, name), 'wx', 0o600));
        return name;
      },
      run: () => fsyncFolder(probes),
      finish: (name) => cleanUp(probes, name),
    }),
    timed('floor.create', 'bare durable create', {
      prepare: () => fresh('created'),
      run: (name) => bareCreate(join(bare, name), join(bareStaging, name), bytes),
      finish: (name) => cleanUp(bare, name),
    }),
    timed('floor.replace', 'bare durable replace', {
      prepare: () => fresh('temp'),
      run: (name) => bareReplace(bareReplaced, join(bareStaging, name), bytes),
    }),
    timed('floor.remove', 'bare durable remove', {
      prepare: () => {
        const name = fresh('removed');
        bareCreate(join(bare, name), join(bareStaging, name), bytes);
        return name;
      },
      run: (name) => bareRemove(join(bare, name)),
    }),

    // 2. private-files.
    timed('files.create', 'private-files create', {
      prepare: () => fresh('created'),
      run: (name) => void files.create(join(documents, name), bytes),
      finish: (name) => cleanUp(documents, name),
    }),
    timed('files.replace', 'private-files replace', {
      run: () => {
        replaced = files.replace(join(documents, 'replaced.json'), replaced, bytes);
      },
    }),
    timed('files.remove', 'private-files remove', {
      prepare: () => {
        const path = join(documents, fresh('removed'));
        return { path, snapshot: files.create(path, bytes) };
      },
      run: ({ path, snapshot }) => files.remove(path, snapshot),
    }),
    timed('files.read', 'private-files read', {
      run: () => {
        if (files.read(read)?.bytes.byteLength !== bytes.byteLength) throw new Error('private-files read: wrong bytes');
      },
    }),

    // 2. Peers.
    timed('write-file-atomic.create', 'write-file-atomic writeFileSync, new file', {
      prepare: () => fresh('created'),
      run: (name) => writeFileAtomic.sync(join(peer, name), buffer, { mode: 0o600 }),
      finish: (name) => cleanUp(peer, name),
    }),
    timed('write-file-atomic.create-durable', 'write-file-atomic writeFileSync, new file, + folder fsync', {
      prepare: () => fresh('created'),
      run: (name) => {
        writeFileAtomic.sync(join(peer, name), buffer, { mode: 0o600 });
        fsyncFolder(peer);
      },
      finish: (name) => cleanUp(peer, name),
    }),
    timed('write-file-atomic.replace', 'write-file-atomic writeFileSync over a file', {
      run: () => writeFileAtomic.sync(peerReplaced, buffer, { mode: 0o600 }),
      finish: () => fsyncFolder(peer),
    }),
    timed('write-file-atomic.replace-durable', 'write-file-atomic writeFileSync over a file, + folder fsync', {
      run: () => {
        writeFileAtomic.sync(peerReplacedDurable, buffer, { mode: 0o600 });
        fsyncFolder(peer);
      },
    }),
    timed('fs.read', 'readFileSync', {
      run: () => {
        if (readFileSync(read).byteLength !== bytes.byteLength) throw new Error('readFileSync: wrong bytes');
      },
    }),
    timed('fs.read-hash', 'readFileSync + SHA-256 of the bytes', {
      run: () => void createHash('sha256').update(readFileSync(read)).digest('hex'),
    }),
  ];
}
