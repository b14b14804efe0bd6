export { default } from './tooling/eslint.config.js';
