export { main, type MainIO } from './main.js';
