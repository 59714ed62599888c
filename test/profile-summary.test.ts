import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { layer, summarizeProfile } from '../bench/profile-summary.js';

// A profile of 10 samples 1 ms apart: 4 in SQLite, then 6 in Fastify.
function profile() {
  const frame = (functionName: string, url: string) => ({ functionName, url, lineNumber: 0, columnNumber: 0 });
  return {
    nodes: [
      { id: 1, callFrame: frame('(root)', ''), children: [2, 3] },
      { id: 2, callFrame: frame('executeQuery', 'file:///app/node_modules/kysely/dist/esm/dialect/sqlite/sqlite-driver.js') },
      { id: 3, callFrame: frame('route', 'file:///app/node_modules/fastify/lib/route.js') },
    ],
    startTime: 0,
    endTime: 10_000,
    samples: [2, 2, 2, 2, 3, 3, 3, 3, 3, 3],
    timeDeltas: Array.from({ length: 10 }, () => 1000),
  };
}

describe('bench/profile-summary', () => {
  it('puts functions in layers', () => {
    const f = (functionName: string, url: string) => layer({ functionName, url, lineNumber: 0, columnNumber: 0 });
    assert.equal(f('close', ''), 'file system calls handed to the thread pool');
    assert.equal(f('handler', 'file:///app/dist/src/http/routes/objects.js'), 'files-rest code');
    assert.equal(f('(idle)', ''), null);
    assert.equal(f('parserOnIncoming', 'node:_http_server'), 'Node: HTTP, sockets, streams, event loop');
  });

  it('gives each layer per unit, over the whole profile or a window counted back from its end', () => {
    const all = summarizeProfile(profile(), { per: 2 });
    // A sample lasts until the next one (the last one counts 0): SQLite 4 ms, Fastify 5 ms, for 2 units.
    assert.match(all, /2000\.0 µs .*SQLite/);
    assert.match(all, /2500\.0 µs .*Fastify/);
    // From 5 ms before the end, 2 ms long: the samples at 5, 6 and 7 ms, all in Fastify.
    const w = summarizeProfile(profile(), { per: 1, window: { fromEnd: 0.005, length: 0.002 } });
    assert.doesNotMatch(w, /SQLite/);
    assert.match(w, /Fastify/);
    assert.match(w, /in a window of 0.002 s/);
  });
});
