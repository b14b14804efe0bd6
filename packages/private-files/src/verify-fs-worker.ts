import { verifyFileSystemWorker } from './verify-fs.js';

// The module `verifyFileSystem` starts by default, with `node`: one racing worker.
verifyFileSystemWorker();
