// FILES_REST_HEAP_GROWTH_PERCENT: V8's heap-growing factor set at run time (src/util/heap-growth.ts).
// Each case runs in a child process (a V8 flag, once set, stays set for the process): a live set
// of ~20 MB and a stream of objects that live long enough to be promoted and then die, as requests
// in flight do. The comparison is with a growth of 300 % given on the command line, V8's largest
// factor: V8's own choice varies with the machine and the Node.js version (Node 24 chose 50 MB in
// one run and 317 in another). The stream is long enough (400 000 objects alive at a time) to be
// promoted on Node 24 too, whose young generation held a shorter one whole in one run of five.
// Measured here: 408 MB (Node 20) and 413-479 MB (Node 24) at 300 %, 160 and 212 MB at 50 %.
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
const [percent, simulated] = process.argv.slice(1);
const applied = limitHeapGrowth(Number(percent), simulated ? JSON.parse(simulated) : process.execArgv);
const live = [];
for (let i = 0; i < 200_000; i++) live.push({ a: i, b: 'x'.repeat(8) + i, c: [i, i + 1] });
const ring = new Array(400_000);
let peak = 0;
for (let i = 0; i < 6_000_000; i++) {
  ring[i % ring.length] = { i, s: String(i), arr: [i, i, i] };
  if (i % 5000 === 0) peak = Math.max(peak, getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_used_size);
}
process.stdout.write(JSON.stringify({ applied, peakMB: peak / 1048576, live: live.length }));
`;

/** Runs the churn with `percent` as the setting; `nodeFlags` go to Node.js, `simulated` replaces process.execArgv for the check. */
function churn(percent: number, opts: { nodeFlags?: string[]; simulated?: string[] } = {}): { applied: boolean; peakMB: number } {
  const args = [...(opts.nodeFlags ?? []), '--input-type=module', '-e', CHURN, String(percent)];
  if (opts.simulated) args.push(JSON.stringify(opts.simulated));
  return JSON.parse(execFileSync(process.execPath, args, { encoding: 'utf8' })) as { applied: boolean; peakMB: number };
}

describe('FILES_REST_HEAP_GROWTH_PERCENT: how far the heap grows past its live objects', () => {
  it("50 % keeps the old space far below V8's largest factor, and a factor given to Node.js wins", () => {
    const wide = churn(50, { nodeFlags: ['--heap-growing-percent=300'] });
    const limited = churn(50);
    assert.equal(wide.applied, false, 'the command-line flag is left as it is');
    assert.equal(limited.applied, true);
    assert.ok(limited.peakMB < wide.peakMB * 0.7, `old space peaked at ${limited.peakMB.toFixed(1)} MB with 50 %, ${wide.peakMB.toFixed(1)} MB with 300 % on the command line`);
  });

  it('recognises the flag in both spellings, and 0 sets nothing', () => {
    assert.equal(churn(50, { simulated: ['--heap-growing-percent=200'] }).applied, false);
    assert.equal(churn(50, { simulated: ['--heap_growing_percent=200'] }).applied, false);
    assert.equal(churn(50, { simulated: ['--heap-growing-percent-x'] }).applied, true);
    assert.equal(churn(0, { simulated: [] }).applied, false);
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
