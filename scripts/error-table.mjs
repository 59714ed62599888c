#!/usr/bin/env node
// Writes the README's error table from the catalogue (src/errors.ts, compiled to dist/).
// test/readme.test.ts fails when the README and the catalogue disagree: after adding an error,
// run `npm run build && node scripts/error-table.mjs --write`.
import { readFileSync, writeFileSync } from 'node:fs';

const { ERRORS } = await import(new URL('../dist/src/errors.js', import.meta.url).href);
const rows = ['| code | status | message |', '|---|---|---|'];
for (const [code, spec] of Object.entries(ERRORS)) rows.push(`| \`${code}\` | ${spec.status} | ${spec.message.replace(/\|/g, '\\|')} |`);
const table = rows.join('\n');
if (process.argv.includes('--write')) {
  const path = new URL('../README.md', import.meta.url);
  const readme = readFileSync(path, 'utf8');
  const next = readme.replace(/<!-- error-table:start -->[\s\S]*<!-- error-table:end -->/, `<!-- error-table:start -->\n${table}\n<!-- error-table:end -->`);
  writeFileSync(path, next);
} else {
  console.log(table);
}
