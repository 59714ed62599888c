// collectAfterStartup (src/util/startup-gc.ts): one full collection once `serve` or `worker` has
// started, which arms V8's memory reducer. Run in a child process: the flag it sets stays set.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const MODULE = fileURLToPath(new URL('../src/util/startup-gc.js', import.meta.url));

const CHILD = `
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { collectAfterStartup } from ${JSON.stringify(MODULE)};
const kinds = [];
const obs = new PerformanceObserver((list) => { for (const e of list.getEntries()) kinds.push(e.detail.kind); });
obs.observe({ entryTypes: ['gc'] });
const before = typeof globalThis.gc;
const ran = collectAfterStartup();
setTimeout(() => {
  obs.disconnect();
  process.stdout.write(JSON.stringify({ ran, before, after: typeof globalThis.gc, majors: kinds.filter((k) => k === constants.NODE_PERFORMANCE_GC_MAJOR).length }));
}, 50);
`;

function child(flags: string[] = []): { ran: boolean; before: string; after: string; majors: number } {
  return JSON.parse(execFileSync(process.execPath, [...flags, '--input-type=module', '-e', CHILD], { encoding: 'utf8' }));
}

describe('collectAfterStartup', () => {
  it('runs one full collection without putting gc on the global', () => {
    const r = child();
    assert.equal(r.ran, true);
    assert.ok(r.majors >= 1, `major collections seen: ${r.majors}`);
    assert.equal(r.before, 'undefined');
    assert.equal(r.after, 'undefined');
  });

  it('uses the global gc when Node.js was started with --expose-gc', () => {
    const r = child(['--expose-gc']);
    assert.equal(r.ran, true);
    assert.ok(r.majors >= 1);
    assert.equal(r.after, 'function');
  });
});
