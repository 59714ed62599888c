#!/usr/bin/env node
// Bundles the web console (console/*.tsx, Preact and Uppy) into static files the server serves from
// dist/console/: console.js (one ES module, minified, no source map), console.css (Uppy's CSS
// included) and index.html. Nothing is loaded from a CDN or the network at run time.
// Run by `npm run build`/`prepare` and by scripts/run-tests.mjs, after tsc.
import { build } from 'esbuild';
import { copyFile, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const out = join(root, 'dist', 'console');
await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
const common = { bundle: true, minify: true, sourcemap: false, logLevel: 'warning', legalComments: 'none', absWorkingDir: root };
await build({
  ...common,
  entryPoints: [join(root, 'console', 'main.tsx')],
  outfile: join(out, 'console.js'),
  format: 'esm',
  platform: 'browser',
  target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  define: { 'process.env.NODE_ENV': '"production"' },
});
await build({ ...common, entryPoints: [join(root, 'console', 'style.css')], outfile: join(out, 'console.css'), loader: { '.svg': 'dataurl', '.png': 'dataurl' } });
await copyFile(join(root, 'console', 'index.html'), join(out, 'index.html'));
