// The layering of src/ (scripts/check-imports.mjs): the domain imports no door, tasks or CLI, and
// no value import cycle exists. The script is also run on a small fixture that breaks both rules,
// so a script that stopped finding anything would fail here.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = new URL('../..', import.meta.url).pathname;
const script = join(root, 'scripts', 'check-imports.mjs');

function check(dir?: string): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [script, ...(dir ? [dir] : [])], { encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
}

describe('Module layering', () => {
  it('the domain imports nothing from http, tasks or cli, and there is no import cycle', () => {
    const r = check();
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /imports ok/);
  });

  it('the check finds a domain module importing a door and a value cycle, and ignores type-only ones', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'layering-'));
    try {
      await mkdir(join(dir, 'src', 'domain'), { recursive: true });
      await mkdir(join(dir, 'src', 'http'), { recursive: true });
      await writeFile(join(dir, 'src', 'domain', 'a.ts'), "import { b } from '../http/b.js';\nexport const a = () => b;\n");
      await writeFile(join(dir, 'src', 'http', 'b.ts'), "import { a } from '../domain/a.js';\nexport const b = () => a;\n");
      await writeFile(join(dir, 'src', 'http', 'c.ts'), "import type { D } from './d.js';\nexport type C = D;\n");
      await writeFile(join(dir, 'src', 'http', 'd.ts'), "import { type C } from './c.js';\nexport type D = C | 1;\n");
      const r = check(dir);
      assert.equal(r.status, 1, r.out);
      assert.match(r.out, /layering: src\/domain\/a\.ts imports src\/http\/b\.ts/);
      assert.match(r.out, /cycle: src\/domain\/a\.ts ↔ src\/http\/b\.ts/);
      assert.doesNotMatch(r.out, /c\.ts ↔/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
