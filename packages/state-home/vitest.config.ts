export { default } from '../../tooling/vitest.shared.js';
