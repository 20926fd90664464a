// The package's entry (package.json "main": lib/index.js, which the labextension build reads).
// The plugins live in plugins/; this file only re-exports them.
export * from './plugins/plugin';
export { default } from './plugins/plugin';
