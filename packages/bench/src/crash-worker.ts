import { fileOwnership } from '@leasehold/coordination';
import { Registry } from '@leasehold/registry';
import { CONFIG } from './fixtures.js';

// A process that dies holding something, so that the fsync count can measure
// what follows a crash: `owner` acquires the workspace and exits without
// releasing it (a dead owner, for recovery); `registry-writer` exits inside a
// registry transaction for the workspace (a dead writer's lock, for the next
// writer to take over). argv: <owner | registry-writer> <stateHome> <workspace> <endpoint>.

const [mode, stateHome, workspace, endpoint] = process.argv.slice(2);
if (stateHome === undefined || workspace === undefined || endpoint === undefined) {
  throw new Error('crash worker: expected <owner | registry-writer> <stateHome> <workspace> <endpoint>');
}
if (mode === 'owner') {
  await fileOwnership({ stateHome }).acquire(workspace, CONFIG, { boundEndpoint: endpoint });
  process.exit(0);
} else if (mode === 'registry-writer') {
  await new Registry(stateHome).transaction(workspace, () => process.exit(0));
} else {
  throw new Error(`crash worker: unknown mode ${mode}`);
}
