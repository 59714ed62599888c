// Ids: random UUIDs (version 4) where an id must say nothing, time-ordered ones (version 7, RFC 9562)
// for rows written at upload rate, so that their unique indexes grow at one edge (src/util/ids.ts).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isUuid, newId, newOrderedId } from '../src/util/ids.js';

describe('ids', () => {
  it('newId is a random version 4 UUID', () => {
    const id = newId();
    assert.ok(isUuid(id));
    assert.equal(id[14], '4');
  });

  it('newOrderedId is a version 7 UUID: its time in the first 48 bits, the RFC variant, 74 random bits', () => {
    const t = Date.UTC(2026, 10, 28, 23, 59, 1, 234);
    const id = newOrderedId(t);
    assert.ok(isUuid(id), id);
    assert.equal(id[14], '7');
    assert.match(id[19]!, /[89ab]/);
    assert.equal(parseInt(id.slice(0, 8) + id.slice(9, 13), 16), t);
    // The random part differs between ids of the same millisecond.
    const same = new Set(Array.from({ length: 2000 }, () => newOrderedId(t)));
    assert.equal(same.size, 2000);
  });

  it('ids of later milliseconds sort after earlier ones, as text (what an index on them sees)', () => {
    const ids: string[] = [];
    for (let ms = 1_700_000_000_000; ms < 1_700_000_000_000 + 5000; ms += 7) ids.push(newOrderedId(ms));
    assert.deepEqual([...ids].sort(), ids);
    // Past the pool of random bytes (409 ids a batch), still unique.
    assert.equal(new Set(Array.from({ length: 5000 }, () => newOrderedId())).size, 5000);
  });
});
