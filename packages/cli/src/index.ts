export { main, type MainIO } from './main.js';
export { openStateHome, type OpenBackend, type OpenOptions } from './backend.js';
