import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Throttle } from '../src/storage/throttle.js';

describe('Migration throttle (FILES_REST_MIGRATION_BYTES_PER_SECOND)', () => {
  it('passes every byte, in order, and never faster than the rate allows', async () => {
    const chunks = Array.from({ length: 12 }, (_, i) => Buffer.alloc(25 * 1024, i));
    const out: Buffer[] = [];
    const t0 = Date.now();
    await pipeline(
      Readable.from(chunks),
      new Throttle(1024 * 1024),
      new Writable({
        write(c: Buffer, _e, cb) {
          out.push(c);
          cb();
        },
      }),
    );
    const elapsed = Date.now() - t0;
    assert.deepEqual(Buffer.concat(out), Buffer.concat(chunks));
    // 300 KiB at 1 MiB/s cannot take less than about 293 ms.
    assert.ok(elapsed >= 280, `took ${elapsed} ms`);
  });
});
