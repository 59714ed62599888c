// feed (src/util/feed.ts): a stream the receiver does not own (an HTTP request's body) into the
// meter. It must keep the source alive on every failure, so the refusal can still be sent on its
// socket, and report every way either side fails.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough, Readable, Writable } from 'node:stream';
import { setImmediate as tick } from 'node:timers/promises';
import { feed } from '../src/util/feed.js';

const chunk = (n: number, fill = 1) => Buffer.alloc(n, fill);

function sink(opts: { highWaterMark?: number; delayMs?: number; failAt?: number } = {}): Writable & { received: number } {
  const w = new Writable({
    highWaterMark: opts.highWaterMark ?? 16 * 1024,
    write(c: Buffer, _e, cb) {
      w.received += c.length;
      if (opts.failAt !== undefined && w.received >= opts.failAt) return cb(new Error('sink refused'));
      if (opts.delayMs) setTimeout(cb, opts.delayMs);
      else cb();
    },
  }) as Writable & { received: number };
  w.received = 0;
  return w;
}

describe('feed: a client stream into the meter', () => {
  it('moves every byte and settles when the destination has finished', async () => {
    const src = Readable.from([chunk(1000), chunk(2000), chunk(3000)], { objectMode: false });
    const dest = sink();
    await feed(src, dest);
    assert.equal(dest.received, 6000);
    assert.ok(dest.writableFinished);
  });

  it('holds the source back while the destination is full (backpressure)', async () => {
    const src = new PassThrough({ highWaterMark: 1024 });
    const dest = sink({ highWaterMark: 1024, delayMs: 5 });
    const done = feed(src, dest);
    for (let i = 0; i < 20; i++) src.write(chunk(1024));
    src.end();
    await tick();
    // The destination took one chunk and asked for a pause: the rest waits in the source.
    assert.equal(src.isPaused(), true);
    assert.ok(dest.received < 20 * 1024);
    await done;
    assert.equal(dest.received, 20 * 1024);
  });

  it('a failing destination: the refusal is reported, the source is paused and not destroyed, a late source error is swallowed', async () => {
    const src = new PassThrough();
    const dest = sink({ failAt: 1 });
    const done = feed(src, dest);
    src.write(chunk(10));
    await assert.rejects(done, /sink refused/);
    assert.equal(src.destroyed, false);
    assert.equal(src.listenerCount('data'), 0);
    assert.equal(dest.destroyed, true);
    // The socket under the request fails later: no uncaught exception.
    src.destroy(new Error('ECONNRESET later'));
    await tick();
  });

  it('a source that fails or closes before its end fails the feed and destroys the destination', async () => {
    for (const end of [(s: PassThrough) => s.destroy(Object.assign(new Error('gone'), { code: 'ECONNRESET' })), (s: PassThrough) => s.destroy()]) {
      const src = new PassThrough();
      const dest = sink();
      const done = feed(src, dest);
      src.write(chunk(10));
      await tick();
      end(src);
      const e = (await done.then(() => assert.fail('fed'), (x: unknown) => x)) as NodeJS.ErrnoException;
      assert.ok(['ECONNRESET', 'ERR_STREAM_PREMATURE_CLOSE'].includes(e.code ?? ''), String(e));
      assert.equal(dest.destroyed, true);
    }
  });

  it('a source already failed or closed at the start fails at once', async () => {
    const src = new PassThrough();
    src.destroy();
    await tick();
    await assert.rejects(feed(src, sink()), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
  });

  it('the signal ends it with an AbortError carrying the reason, before or during the transfer', async () => {
    const reason = new Error('stalled');
    const before = new AbortController();
    before.abort(reason);
    await assert.rejects(feed(new PassThrough(), sink(), before.signal), (e: Error) => e.name === 'AbortError' && e.cause === reason);

    const during = new AbortController();
    const src = new PassThrough();
    const dest = sink();
    const done = feed(src, dest, during.signal);
    src.write(chunk(10));
    await tick();
    during.abort(reason);
    await assert.rejects(done, (e: NodeJS.ErrnoException) => e.code === 'ABORT_ERR' && e.cause === reason);
    assert.equal(src.destroyed, false);
    assert.equal(dest.destroyed, true);
  });

  it('a destination destroyed by its reader (a failed write to storage) fails the feed', async () => {
    const src = new PassThrough();
    const dest = sink();
    const done = feed(src, dest);
    src.write(chunk(10));
    await tick();
    dest.destroy(new Error('disk full'));
    await assert.rejects(done, /disk full/);
    assert.equal(src.destroyed, false);
  });
});
