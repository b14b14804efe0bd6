#!/usr/bin/env node
import { main } from './main.js';

void main(process.argv.slice(2), {
  // Getters: Node makes each of its standard streams on first touch, a cost every command would pay
  // at start-up; a command touches only those it writes or reads (stdin: a confirmation prompt).
  get stdin() {
    return process.stdin;
  },
  get stdout() {
    return process.stdout;
  },
  get stderr() {
    return process.stderr;
  },
  cwd: process.cwd(),
  env: process.env,
}).then((code) => {
  process.exitCode = code;
});
