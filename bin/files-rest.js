#!/usr/bin/env node
// Entry point of the `files-rest` command. The TypeScript sources are compiled to dist/ by
// `npm install` (the package's `prepare` script).
// Uploads fsync each file and its directory in libuv's thread pool; its default 4 threads would let
// only two uploads finish at a time. Set before anything uses the pool.
process.env.UV_THREADPOOL_SIZE ??= '32';
const { existsSync } = await import('node:fs');
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/src/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write('files-rest: not built yet; run `npm install` (or `npm run build`) in the package directory\n');
  process.exit(1);
}
const { main } = await import(entry.href);
await main(process.argv.slice(2));
