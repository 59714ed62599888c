// FILES_REST_HEAP_GROWTH_PERCENT: V8's heap-growing factor set at run time (src/util/heap-growth.ts).
// Each case runs in a child process (a V8 flag, once set, stays set for the process): a live set
// of ~20 MB and a stream of objects that live long enough to be promoted and then die, as requests
// in flight do. Measured here: the old space peaked at 265 MB with V8's own factor and 108 MB with
// 50 %.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runCli } from './support/process.js';
import { testEnvironment } from './support/server.js';
import { rm } from 'node:fs/promises';

const MODULE = fileURLToPath(new URL('../src/util/heap-growth.js', import.meta.url));

const CHURN = `
import { getHeapSpaceStatistics } from 'node:v8';
import { limitHeapGrowth } from ${JSON.stringify(MODULE)};
const [percent, ...execArgv] = process.argv.slice(1);
const applied = limitHeapGrowth(Number(percent), execArgv);
const live = [];
for (let i = 0; i < 200_000; i++) live.push({ a: i, b: 'x'.repeat(8) + i, c: [i, i + 1] });
const ring = new Array(150_000);
let peak = 0;
for (let i = 0; i < 6_000_000; i++) {
  ring[i % ring.length] = { i, s: String(i), arr: [i, i, i] };
  if (i % 5000 === 0) peak = Math.max(peak, getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_used_size);
}
process.stdout.write(JSON.stringify({ applied, peakMB: peak / 1048576, live: live.length }));
`;

function churn(percent: number, execArgv: string[] = []): { applied: boolean; peakMB: number } {
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', CHURN, String(percent), ...execArgv], { encoding: 'utf8' })) as { applied: boolean; peakMB: number };
}

describe('FILES_REST_HEAP_GROWTH_PERCENT: how far the heap grows past its live objects', () => {
  it('50 % keeps the old space far below where V8 left alone lets it grow', () => {
    const own = churn(0);
    const limited = churn(50);
    assert.equal(own.applied, false);
    assert.equal(limited.applied, true);
    assert.ok(limited.peakMB < own.peakMB * 0.6, `old space peaked at ${limited.peakMB.toFixed(1)} MB with 50 %, ${own.peakMB.toFixed(1)} MB with V8's factor`);
  });

  it('leaves a --heap-growing-percent given to Node.js as it is', () => {
    assert.equal(churn(50, ['--heap-growing-percent=200']).applied, false);
    assert.equal(churn(50, ['--heap_growing_percent=200']).applied, false);
    assert.equal(churn(50, ['--heap-growing-percent-x']).applied, true);
  });

  it('refuses a value that is not a whole number from 0 to 1000, naming the setting', async () => {
    const e = await testEnvironment('files-rest-heap-growth-', { ownDatabase: false });
    try {
      for (const v of ['-5', 'half', '1001']) {
        const r = await runCli(['serve'], { ...e.env, FILES_REST_HEAP_GROWTH_PERCENT: v });
        assert.notEqual(r.code, 0);
        assert.match(r.stderr, /FILES_REST_HEAP_GROWTH_PERCENT/);
      }
    } finally {
      await rm(e.dir, { recursive: true, force: true });
    }
  });
});
