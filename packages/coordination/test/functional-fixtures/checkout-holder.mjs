// Takes a workspace's plain checkout lock through '@leasehold/coordination',
// prints one JSON line `{"held": token}`, and stays alive (without touching
// the lock again) until it is killed: a plain tool that dies holding the lock.
//
// Usage: node checkout-holder.mjs <stateHome> <workspaceRoot>
import { writeSync } from 'node:fs';
import { Checkout } from '@leasehold/coordination';

const [stateHome, root] = process.argv.slice(2);
const handle = await new Checkout(root, { stateHome }).acquire();
writeSync(1, `${JSON.stringify({ held: handle.token })}\n`);
setInterval(() => {}, 1 << 30);
