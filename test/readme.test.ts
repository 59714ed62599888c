import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ERRORS } from '../src/errors.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

describe('README', () => {
  it('lists every error of the catalogue with its status and message', () => {
    for (const [code, spec] of Object.entries(ERRORS)) {
      const row = `| \`${code}\` | ${spec.status} | ${spec.message.replace(/\|/g, '\\|')} |`;
      assert.ok(readme.includes(row), `README error table lacks or misstates ${code} (run node scripts/error-table.mjs --write)`);
    }
    const documented = [...readme.matchAll(/^\| `([A-Z_]+)` \| \d{3} \|/gm)].map((m) => m[1]);
    for (const code of documented) assert.ok(code! in ERRORS, `README lists ${code}, which the catalogue does not have`);
  });

  it('names the quick start and the test command', () => {
    assert.match(readme, /npm install && npm start/);
    assert.match(readme, /npm test/);
  });
});
